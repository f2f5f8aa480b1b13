#!/usr/bin/python3
"""bench/sampling_plot.py - draws distinct records seen against records
downloaded, one line per configuration, from the CSV of bench/sampling.py.

  /usr/bin/python3 bench/sampling_plot.py RUN.csv OUT.svg [--dataset RECORDS]

A plain SVG (no plotting library): the diagonal is the bound (every record
downloaded is one not seen before) until the dataset has been covered once,
then flat at the dataset size.  The legend sits to the right of the plot
area, so it covers no line.
"""
import csv
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
          "#17becf", "#7f7f7f", "#bcbd22", "#000000", "#aec7e8"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    dataset = None
    if "--dataset" in sys.argv:
        dataset = int(sys.argv[sys.argv.index("--dataset") + 1])
    series = {}
    with open(src) as f:
        for r in csv.DictReader(f):
            series.setdefault(r["config"], []).append((int(r["downloaded_at_view"]),
                                                       int(r["distinct"])))
    if not series:
        sys.exit("sampling_plot.py: %s has no rows" % src)
    xmax = max(x for s in series.values() for x, _ in s) or 1
    ymax = max(y for s in series.values() for _, y in s) or 1
    if dataset:
        ymax = max(ymax, dataset)
    W, H, L, B, PW, PH = 860, 420, 70, 50, 520, 320
    top = H - B - PH

    def px(x):
        return L + PW * x / xmax

    def py(y):
        return H - B - PH * y / ymax

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="20" font-size="14">distinct records seen vs records downloaded'
         '</text>' % L,
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, L + PW, H - B),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, L, top)]
    for i in range(6):
        x, y = xmax * i / 5, ymax * i / 5
        o.append('<text x="%.0f" y="%d" text-anchor="middle">%d</text>' % (px(x), H - B + 16, x))
        o.append('<text x="%d" y="%.0f" text-anchor="end">%d</text>' % (L - 6, py(y) + 4, y))
    o.append('<text x="%d" y="%d" text-anchor="middle">records downloaded before each view</text>'
             % (L + PW / 2, H - 10))
    o.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">'
             'distinct records seen</text>' % (top + PH / 2, top + PH / 2))
    # the bound: y = x until the dataset is covered
    cap = dataset or ymax
    bx = min(xmax, cap)
    o.append('<polyline fill="none" stroke="#999" stroke-dasharray="5,4" points="%.1f,%.1f '
             '%.1f,%.1f %.1f,%.1f"/>' % (px(0), py(0), px(bx), py(min(bx, cap)), px(xmax),
                                          py(min(bx, cap))))
    lx, ly = L + PW + 20, top + 10
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-dasharray="5,4"/>'
             '<text x="%d" y="%d">bound</text>' % (lx, ly, lx + 24, ly, lx + 30, ly + 4))
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = COLORS[i % len(COLORS)]
        pts = [(0, 0)] + sorted(pts)
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (c, " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)))
        yy = ly + 18 * (i + 1)
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                 '<text x="%d" y="%d">%s</text>' % (lx, yy, lx + 24, yy, c, lx + 30, yy + 4,
                                                   name))
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
