"""NoFTL Fig. 3 from Python: TPC-B on NoFTL (native), DFTL 2/15/35% and the page FTL, as bars
of throughput with their deviation and the slowdown against native over each bar.

    .venv/bin/python examples/python/fig3.py            # quick: seconds, not the paper's set-up
    .venv/bin/python examples/python/fig3.py --full     # `noftl compare`'s defaults (minutes)
    .venv/bin/python examples/python/fig3.py --out fig3.png

Draws with matplotlib when it is installed (to --out, default fig3.png), else prints the table.
The numbers are the CLI's (`noftl compare --json`), through the Python package noftl."""

import argparse

import noftl


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="the CLI's default comparison, not quick")
    p.add_argument("--workload", default="tpcb", help="tpcb, tatp or tpcc")
    p.add_argument("--out", default="fig3.png", help="the figure's file (with matplotlib)")
    a = p.parse_args()
    r = noftl.compare(workload=a.workload, quick=not a.full)
    frame = r.frame()[["storage", "throughput_tps", "stdev", "slowdown"]]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{r['workload']} scale {r['scale']} (matplotlib is not installed: the table)")
        print(frame.to_string(index=False))
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(frame["storage"], frame["throughput_tps"], yerr=frame["stdev"], capsize=4,
                  color=["#2a7"] + ["#c63"] * (len(frame) - 1))
    for bar, slowdown, store in zip(bars, frame["slowdown"], frame["storage"]):
        if store != "native":
            ax.annotate(f"{slowdown:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", xytext=(0, 6), textcoords="offset points")
    ax.set_ylabel("transactions per second (virtual time)")
    ax.set_title(f"NoFTL Fig. 3: {r['workload']} scale {r['scale']}"
                 f"{' (quick)' if not a.full else ''}")
    fig.tight_layout()
    fig.savefig(a.out)
    print(f"wrote {a.out}")
    print(frame.to_string(index=False))


if __name__ == "__main__":
    main()
