"""A fleet of 3 loopback servers, one killed mid-run: `python tests/bench.py fleet [n=20000 latency=0.5 jitter=0.1
slots=64 kill_at=10]`.

Each fault server works on at most `slots` requests at a time (queueing the rest), so its capacity is
slots / latency requests per second, like a GPU server with a batch limit; the runner keeps 3 x slots in
flight. Server 0 is killed with SIGKILL `kill_at` seconds into the run. Figures:
  lost        prompts without an answer at the end (finish_reason != stop),
  duplicated  prompts answered more than once, counted at the servers (the two survivors, and the dead one
              as it was just before the kill), plus duplicate rows in the table or the cache,
  ratio       the ideal wall time for the capacity there was (3 servers until the kill, 2 after) over the
              achieved one: ideal = kill_at + (n - 3 * capacity * kill_at) / (2 * capacity)."""
import sqlite3, tempfile, threading, time
from collections import Counter
from pathlib import Path
from fault_server import start_process, get_stats
from orbench_ml.runner import run_batch

def _answered(url)->Counter:
    "Answers per prompt, counted at a server"
    return Counter({p: v[1] for p, v in get_stats(url)['prompts'].items() if v[1]})

def run(n=20000, latency=0.5, jitter=0.1, slots=64, kill_at=10.0, **_):
    n, latency, jitter, slots, kill_at = int(n), float(latency), float(jitter), int(slots), float(kill_at)
    servers = [start_process(latency=latency, jitter=jitter, slots=slots, lifetime=900, seed=i) for i in range(3)]
    urls = [url for _, url in servers]
    before_kill = Counter()
    def kill():
        before_kill.update(_answered(urls[0]))
        servers[0][0].kill()
    try:
        with tempfile.TemporaryDirectory() as d:
            cache = Path(d)/'replies.sqlite'
            prompts = [f'fleet bench prompt {i}' for i in range(n)]
            killer = threading.Timer(kill_at, kill)
            t0 = time.perf_counter(); killer.start()
            df = run_batch(prompts, 'openai-compatible:bench-model@' + ','.join(f'{u}/v1' for u in urls), cache=cache,
                           concurrency=3 * slots, progress=False, timeout=30)
            wall = time.perf_counter() - t0
            killer.join()
            with sqlite3.connect(cache) as db: cache_rows = db.execute('SELECT count(*) FROM replies').fetchone()[0]
        survivors = [_answered(u) for u in urls[1:]]
    finally:
        for proc, _ in servers: proc.kill(); proc.wait()
    answers = before_kill + survivors[0] + survivors[1]
    duplicated = sum(a > 1 for a in answers.values()) + int(df.prompt_id.duplicated().sum()) + max(0, cache_rows - n)
    capacity = slots / latency
    ideal = kill_at + max(0.0, n - 3 * capacity * kill_at) / (2 * capacity)
    run = df.attrs['run']
    ends = {f'server{i}': run['endpoints'][f'{u}/v1'] for i, u in enumerate(urls)}
    return dict(lost=int((df.finish_reason != 'stop').sum()), duplicated=duplicated, ratio=round(ideal / wall, 3),
                wall_s=round(wall, 2), ideal_s=round(ideal, 2), n=n, requests=run['requests'], endpoints=ends,
                killed_answered_before_kill=len(before_kill), latency=latency, jitter=jitter, slots=slots, kill_at=kill_at)
