/*
 * chart.c - SVG line charts (see chart.h).
 *
 * Owns nothing past one call.  Layout: a fixed 820 px wide canvas, the plot
 * area with gridlines at "nice" tick steps (1, 2, 2.5, 5 x 10^k), axes
 * labelled, and the legend under the plot, one row per series (so that a
 * long label never covers a line or another entry).  Text is escaped
 * for XML; numbers are printed with the C locale's '.' (rollcache never
 * calls setlocale for LC_NUMERIC).
 */
#include "eviction/chart.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W      820.0
#define PLOT_H 360.0
#define ML     78.0 /* left margin */
#define MR     78.0
#define MT     48.0
#define LEG_H  20.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
				      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

static void put_escaped(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
			break;
		}
	}
}

static double nice_step(double range, int ticks)
{
	if (range <= 0)
		return 1;
	double raw = range / ticks;
	double mag = pow(10, floor(log10(raw)));
	static const double m[] = {1, 2, 2.5, 5, 10};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (raw <= m[i] * mag)
			return m[i] * mag;
	return 10 * mag;
}

static double axis_max(const struct evc_chart *c, int right, double given)
{
	if (given > 0)
		return given;
	double mx = 0;
	for (size_t i = 0; i < c->n_series; i++) {
		const struct evc_series *s = &c->series[i];
		if (s->right != right)
			continue;
		for (size_t j = 0; j < s->n; j++)
			if (isfinite(s->y[j]) && s->y[j] > mx)
				mx = s->y[j];
	}
	if (mx <= 0)
		return 1;
	double step = nice_step(mx, 5);
	return ceil(mx / step) * step;
}

static void label_num(char *buf, size_t len, double v, double step)
{
	if (step >= 1 && fabs(v - round(v)) < 1e-9)
		snprintf(buf, len, "%.0f", v);
	else if (step * 10 >= 1)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.2f", v);
}

int evc_chart_svg(FILE *f, const struct evc_chart *c)
{
	size_t npts = 0;
	for (size_t i = 0; i < c->n_series; i++)
		if (c->series[i].n > npts)
			npts = c->series[i].n;
	if (c->n_series == 0 || npts == 0)
		return -EINVAL;

	int has_right = c->ylabel_right != NULL;
	double lmax = axis_max(c, 0, c->ymax_left);
	double lstep = nice_step(lmax, 5);
	int nticks = (int)floor(lmax / lstep + 1e-6);
	if (nticks < 1)
		nticks = 1;
	/* The right axis shares the left one's gridlines: nticks steps of a
	 * nice size that cover its data. */
	double rmax = 1, rstep = 1;
	if (has_right) {
		rmax = axis_max(c, 1, c->ymax_right);
		rstep = nice_step(rmax, nticks);
		while (rstep * nticks < rmax - 1e-9)
			rstep = nice_step(rstep * 1.01 * nticks, nticks);
		rmax = rstep * nticks;
		lmax = lstep * nticks;
	}
	double xmax = c->xmax;
	int x_epochs = 1;
	for (size_t i = 0; i < c->n_series; i++)
		if (c->series[i].x)
			x_epochs = 0;
	if (xmax <= 0) {
		for (size_t i = 0; i < c->n_series; i++)
			for (size_t j = 0; j < c->series[i].n; j++) {
				double xv = c->series[i].x ? c->series[i].x[j] : (double)j;
				if (isfinite(xv) && xv > xmax)
					xmax = xv;
			}
		if (!x_epochs && xmax > 0)
			xmax = ceil(xmax / nice_step(xmax, 10)) * nice_step(xmax, 10);
	}
	if (xmax <= 0)
		xmax = 1;
	double pw = W - ML - MR;
	/* one legend row per series, under the x axis label: no label can run into
	 * another entry or into the plot, however long it is */
	size_t leg_rows = c->n_series;
	double H = MT + PLOT_H + 56 + (double)leg_rows * LEG_H + 10;
	char buf[64];

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" "
		"font-size=\"12\">\n",
		W, H, W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
	if (c->title) {
		fprintf(f,
			"<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" "
			"font-weight=\"bold\">",
			W / 2);
		put_escaped(f, c->title);
		fprintf(f, "</text>\n");
	}

	/* Grid and left ticks. */
	for (double v = 0; v <= lmax + lstep * 1e-6; v += lstep) {
		double y = MT + PLOT_H - v / lmax * PLOT_H;
		fprintf(
		    f,
		    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n",
		    ML, y, ML + pw, y);
		label_num(buf, sizeof(buf), v, lstep);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ML - 6,
			y + 4, buf);
	}
	if (has_right) {
		for (int t = 0; t <= nticks; t++) {
			double v = rstep * t;
			double y = MT + PLOT_H - v / rmax * PLOT_H;
			label_num(buf, sizeof(buf), v, rstep);
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">%s</text>\n",
				ML + pw + 6, y + 4, buf);
		}
	}
	/* X ticks: whole epochs, or nice steps of the given x values. */
	double xstep = nice_step(xmax, 10);
	if (x_epochs && xstep < 1)
		xstep = 1;
	for (double v = 0; v <= xmax + xstep * 1e-6; v += xstep) {
		double x = ML + v / xmax * pw;
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
			x, MT + PLOT_H, x, MT + PLOT_H + 5);
		label_num(buf, sizeof(buf), v, xstep);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x,
			MT + PLOT_H + 19, buf);
	}
	/* Axes. */
	fprintf(f,
		"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"#000\"/>\n",
		ML, MT, pw, PLOT_H);
	if (c->xlabel) {
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", ML + pw / 2,
			MT + PLOT_H + 38);
		put_escaped(f, c->xlabel);
		fprintf(f, "</text>\n");
	}
	if (c->ylabel_left) {
		fprintf(f,
			"<text transform=\"translate(20 %.1f) rotate(-90)\" "
			"text-anchor=\"middle\">",
			MT + PLOT_H / 2);
		put_escaped(f, c->ylabel_left);
		fprintf(f, "</text>\n");
	}
	if (has_right) {
		fprintf(f,
			"<text transform=\"translate(%.1f %.1f) rotate(90)\" "
			"text-anchor=\"middle\">",
			W - 20, MT + PLOT_H / 2);
		put_escaped(f, c->ylabel_right);
		fprintf(f, "</text>\n");
	}

	/* Series and legend. */
	for (size_t i = 0; i < c->n_series; i++) {
		const struct evc_series *s = &c->series[i];
		const char *col = s->color ? s->color : palette[i % 8];
		const char *dash = s->dash == EVC_DASHED   ? " stroke-dasharray=\"7 4\""
				   : s->dash == EVC_DOTTED ? " stroke-dasharray=\"2 3\""
							   : "";
		double ymax = s->right ? rmax : lmax;
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
			col, dash);
		for (size_t j = 0; j < s->n; j++) {
			double v = isfinite(s->y[j]) ? s->y[j] : 0;
			if (v > ymax)
				v = ymax;
			if (v < 0)
				v = 0;
			double xv = s->x ? s->x[j] : (double)j;
			if (!isfinite(xv) || xv < 0)
				xv = 0;
			if (xv > xmax)
				xv = xmax;
			fprintf(f, "%s%.1f,%.1f", j ? " " : "", ML + xv / xmax * pw,
				MT + PLOT_H - v / ymax * PLOT_H);
		}
		fprintf(f, "\"/>\n");
		double lx = ML;
		double ly = MT + PLOT_H + 58 + (double)i * LEG_H;
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-width=\"2\"%s/>\n",
			lx, ly - 4, lx + 28, ly - 4, col, dash);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 34, ly);
		put_escaped(f, s->label);
		if (has_right)
			fputs(s->right ? " (right axis)" : "", f);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
	return ferror(f) ? -EIO : 0;
}
