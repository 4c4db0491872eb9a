#!/usr/bin/env python3
"""The Ray executor of `noftl sweep` (started by `noftl sweep --executor ray`; not run by hand).

    python sweep_ray.py TODO.json OUT NOFTL_BINARY [TIMEOUT_SECONDS|none]

Attaches to the Ray cluster named by RAY_ADDRESS, or starts a local Ray instance when it is
unset. Each job becomes one Ray task that asks for one CPU and the job's memory estimate, runs
the noftl binary on the worker in a private temporary directory, and returns the job's files;
the driver writes them into OUT/jobs/ID/ exactly as the local executor does (status.json last),
so the merge and `--resume` work the same. A task lost with its worker is retried by Ray
(max_retries); a job that fails (non-zero exit, or still running after TIMEOUT_SECONDS of wall
time, when it is killed) is recorded and the sweep goes on.

On a cluster, NOFTL_BINARY must exist at the same path on every worker (or set NOFTL_BIN on the
workers), and paths inside the plan's arguments (e.g. --config) must be valid there too. Before
any job, the driver runs `noftl --version` on every node (a task pinned to it) and stops, naming
the nodes, when one has no such binary or another version than the driver's.

`noftl reproduce` and `noftl compare` use this driver too under `--executor ray`: their jobs are
`noftl run-job SPEC --out {out}/result.json` (one run or row each).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import ray

OUT_DIR = "{out}"


@ray.remote(max_retries=3)
def run_job(job, binary, timeout):
    binary = os.environ.get("NOFTL_BIN", binary)
    work = tempfile.mkdtemp(prefix="noftl-sweep-")
    try:
        argv = [a.replace(OUT_DIR, work) for a in job["argv"]]
        started = time.monotonic()
        try:
            proc = subprocess.run([binary] + argv, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as e:  # killed by subprocess.run
            return {"code": None, "wall": time.monotonic() - started, "timed_out": timeout,
                    "files": {"stderr.txt": e.stderr or b""},
                    "node": ray.util.get_node_ip_address()}
        wall = time.monotonic() - started
        files = {"stderr.txt": proc.stderr}
        if job["json_on_stdout"]:
            if proc.returncode == 0:
                files["result.json"] = proc.stdout
        else:
            files["stdout.txt"] = proc.stdout
        for name in os.listdir(work):
            if name.startswith("result") and name.endswith(".json"):
                with open(os.path.join(work, name), "rb") as f:
                    files[name] = f.read()
        return {"code": proc.returncode, "wall": wall, "files": files,
                "node": ray.util.get_node_ip_address()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


@ray.remote(num_cpus=0, max_retries=0)
def binary_version(binary):
    """The version of the noftl binary on this node, or None when there is none to run."""
    binary = os.environ.get("NOFTL_BIN", binary)
    if not os.access(binary, os.X_OK):
        return binary, None
    try:
        proc = subprocess.run([binary, "--version"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                              timeout=120)
        return binary, proc.stdout.decode(errors="replace").strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return binary, None


def check_binary(binary):
    """Exits (status 2) naming every node without the driver's noftl (path and version)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    want = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, check=True
                          ).stdout.decode().strip()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [(n, binary_version.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote(binary)) for n in nodes]
    bad = []
    for node, ref in refs:
        path, got = ray.get(ref)
        where = node.get("NodeManagerAddress", node["NodeID"])
        if got is None:
            bad.append(f"node {where}: no executable noftl at {path}")
        elif got != want:
            bad.append(f"node {where}: {path} is {got}, the driver's is {want}")
    if bad:
        print("error: the Ray executor runs this noftl on every node, at the driver's path "
              f"({binary}) or at NOFTL_BIN on the node, and the same version:\n  "
              + "\n  ".join(bad), file=sys.stderr, flush=True)
        ray.shutdown()
        sys.exit(2)


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    todo_path, out, binary = sys.argv[1], sys.argv[2], sys.argv[3]
    timeout = None
    if len(sys.argv) > 4 and sys.argv[4] != "none":
        timeout = float(sys.argv[4])
    with open(todo_path) as f:
        jobs = json.load(f)
    ray.init(address=os.environ.get("RAY_ADDRESS"), log_to_driver=False,
             include_dashboard=False)
    check_binary(binary)
    started = time.monotonic()
    pending = {}
    for job in jobs:
        ref = run_job.options(num_cpus=1, memory=max(int(job["memory_bytes"]), 1)).remote(
            job, binary, timeout)
        pending[ref] = job
    done = failed = 0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        ref = ready[0]
        job = pending.pop(ref)
        d = os.path.join(out, "jobs", job["id"])
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "job.json"), "w") as f:
            json.dump(job, f, indent=2)
        try:
            r = ray.get(ref)
            for name, data in r["files"].items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
            ok = r["code"] == 0
            err = None
            if r.get("timed_out") is not None:
                err = f"timed out after {r['timed_out']:g} s (killed)"
            elif not ok:
                lines = [l for l in r["files"]["stderr.txt"].decode(errors="replace").splitlines()
                         if l.strip()]
                err = lines[-1] if lines else "no message (killed?)"
            status = {"id": job["id"], "status": "ok" if ok else "failed",
                      "exit_code": r["code"], "wall_seconds": r["wall"], "error": err}
        except Exception as e:  # the task itself failed after its retries
            ok = False
            status = {"id": job["id"], "status": "failed", "exit_code": None,
                      "wall_seconds": 0.0, "error": f"ray: {e}"}
        write_atomic(os.path.join(d, "status.json"), json.dumps(status, indent=2).encode())
        done += 1
        failed += 0 if ok else 1
        elapsed = time.monotonic() - started
        eta = elapsed / done * (len(jobs) - done)
        note = "" if ok else f"  FAILED: {status['error']}"
        print(f"[ray] {done}/{len(jobs)} jobs, {elapsed:.0f} s elapsed, ETA {eta:.0f} s: "
              f"{job['id']} {job.get('label', '')}{note}", file=sys.stderr, flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
