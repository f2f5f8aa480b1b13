/*
 * chart.h - a small hand-written SVG line chart (per-epoch figures of
 * `rollcache simulate`, and of `rollcache report` later).
 *
 * One x axis (epochs 0..n-1 by default), a left y axis and an optional right one;
 * each series is a polyline on one of them, solid, dashed or dotted, with
 * a legend entry.  No scripts, no external fonts or styles: the file opens
 * in any browser and renders on GitHub.
 */
#ifndef RC_EVICTION_CHART_H
#define RC_EVICTION_CHART_H

#include <stddef.h>
#include <stdio.h>

enum evc_dash { EVC_SOLID = 0, EVC_DASHED = 1, EVC_DOTTED = 2 };

struct evc_series {
	const char *label; /* legend text (escaped on output) */
	const double *x;   /* n values, or NULL: x[i] = i (epochs) */
	const double *y;   /* n values */
	size_t n;
	int right; /* 1: plotted against the right axis */
	enum evc_dash dash;
	const char *color; /* "#1f77b4"; NULL: picked from a palette by index */
};

struct evc_chart {
	const char *title;
	const char *xlabel, *ylabel_left, *ylabel_right; /* right: NULL if unused */
	double ymax_left, ymax_right;			 /* 0: from the data */
	double xmax;					 /* 0: from the data */
	const struct evc_series *series;
	size_t n_series;
};

/*
 * Writes the chart as a complete SVG document to f.  Returns 0, or -EIO if
 * a write failed, -EINVAL if there is no series or no point.
 */
int evc_chart_svg(FILE *f, const struct evc_chart *c);

#endif
