/*
 * source_i.h - struct smp_source, for source.c and the unit test that looks
 * inside it.  The back-ends do not include this: source.c hands them the
 * parts they need (struct smp_conn, the base URL, struct smp_s3).
 */
#ifndef RC_SAMPLER_SOURCE_I_H
#define RC_SAMPLER_SOURCE_I_H

#include "sampler/request_i.h"
#include "sampler/s3_i.h"
#include "sampler/source.h"

struct smp_source {
	enum smp_scheme scheme;
	char *base;	      /* file: "/abs/dir/"; http: "http://h/p/"; s3: NULL (s3.endpoint) */
	struct smp_s3 s3;     /* s3 only */
	struct smp_conn conn; /* listing requests */
	uint32_t rank, world_size; /* the share its listings keep (struct smp_listing) */
};

#endif
