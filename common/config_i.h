/*
 * config_i.h - what config_ini.c (the INI-file reader, built with inih)
 * uses of config.c (the key table, built always).
 *
 * config_ini.c splits a file into sections and key = value lines; config.c
 * owns the keys: which exist in which section, their values and fields.
 */
#ifndef RC_COMMON_CONFIG_I_H
#define RC_COMMON_CONFIG_I_H

#include "common/config.h"

#include <stddef.h>
#include <stdint.h>

/* The sections of the key table; NONE: before any header, BAD: an unknown one. */
enum cmn__section {
	CMN__SEC_NONE,
	CMN__SEC_CACHE,
	CMN__SEC_SOURCE,
	CMN__SEC_SAMPLER,
	CMN__SEC_MOUNT,
	CMN__SEC_EPOCH,
	CMN__SEC_BAD,
};

/*
 * Sets key `name` (as written; '-' == '_') of section sec (CACHE to EPOCH)
 * from the value of an INI line: in c->epochs[epoch_idx] for CMN__SEC_EPOCH,
 * else in c.  Returns 0; or -EINVAL (unknown key, bad value) or -ENOMEM
 * with msg "NAME = VALUE: expected ..." or "unknown key 'NAME': ...", to
 * which the caller prefixes file:line and the section; c is unchanged then.
 */
int cmn__config_ini_key(struct cmn_config *c, enum cmn__section sec, size_t epoch_idx,
			const char *name, const char *value, char *msg, size_t msglen);

/* A decimal number of digits only: 0, -EINVAL (empty, not a digit) or -ERANGE. */
int cmn__config_parse_uint(const char *s, uint64_t *out);

#endif
