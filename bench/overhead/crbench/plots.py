"""PNG plots drawn by gnuplot from the CSV files the harness wrote."""
import os
import shutil
import subprocess

from .errors import BenchError

_HEAD = """set terminal pngcairo size 900,560 font ",11" noenhanced
set datafile separator ","
set key outside right top
set grid
"""


def _gp(script, cwd):
    if not shutil.which("gnuplot"):
        raise BenchError("gnuplot is not installed (Debian: gnuplot-nox); --no-plots skips the plots")
    r = subprocess.run(["gnuplot"], input=_HEAD + script, text=True, capture_output=True, cwd=cwd)
    if r.returncode != 0:
        raise BenchError("gnuplot: " + (r.stderr.strip().splitlines() or ["failed"])[-1])


def _list(names):
    return " ".join(names)


def overhead_vs_interval(out_dir, names):
    _gp(f"""set output "overhead_vs_interval.png"
set title "Slowdown under a checkpoint schedule"
set xlabel "checkpoint interval (s)"
set ylabel "runtime increase (%)"
set logscale x
plot for [w in "{_list(names)}"] w."/overhead.csv" using "interval_s":"slowdown_pct" \\
     with linespoints lw 2 title w
""", out_dir)
    return os.path.join(out_dir, "overhead_vs_interval.png")


def sizes_over_time(out_dir, name, interval):
    png = f"{name}/sizes.png"
    _gp(f"""set output "{png}"
set title "{name}: checkpoint sizes over time (interval {interval:g} s, first run)"
set xlabel "time since start (s)"
set ylabel "written (MiB)"
set style fill solid 0.6
sel(k) = (strcol("kind") eq k && column("repeat") == 1 && column("interval_s") == {interval!r}) \\
    ? column("bytes_written") / 1048576.0 : 1/0
plot "{name}/checkpoints.csv" using "t":(sel("full")) with impulses lw 6 lc rgb "#c03030" title "full", \\
     "" using "t":(sel("incr")) with impulses lw 6 lc rgb "#3060c0" title "incremental", \\
     "" using "t":(sel("full")) with points pt 7 lc rgb "#c03030" notitle, \\
     "" using "t":(sel("incr")) with points pt 7 lc rgb "#3060c0" notitle
""", out_dir)
    return os.path.join(out_dir, png)


def restart_vs_chain(out_dir, names):
    _gp(f"""set output "restart_vs_chain.png"
set title "Restart time against chain length (reverse scan)"
set xlabel "incrementals after the full"
set ylabel "restore time (s)"
set xtics 1
set yrange [0:*]
plot for [w in "{_list(names)}"] w."/restarts.csv" using "chain_length":"restore_s" \\
     with linespoints lw 2 title w
""", out_dir)
    return os.path.join(out_dir, "restart_vs_chain.png")


def migration_rounds(out_dir, name, downtime):
    png = f"{name}/migration.png"
    _gp(f"""set output "{png}"
set title "{name}: live migration pre-copy rounds (downtime {downtime:.3f} s)"
set xlabel "round (the last one with the process frozen)"
set ylabel "sent (MiB)"
set y2label "round time (s)"
set ytics nomirror
set y2tics
set xtics 1
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
set y2range [0:*]
plot "{name}/migration.csv" using "round":(column("bytes")/1048576.0) with boxes lc rgb "#3060c0" title "MiB sent", \\
     "" using "round":"seconds" axes x1y2 with linespoints lw 2 pt 7 lc rgb "#c03030" title "round time"
""", out_dir)
    return os.path.join(out_dir, png)
