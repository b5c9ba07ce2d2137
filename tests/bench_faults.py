"""The runner under injected faults: `python tests/bench.py faults [n=5000 rate=0.2 latency=0.1 concurrency=64]`.

The fault server answers 20% of requests with a fault (429 with Retry-After, 500, a dropped connection,
broken JSON, a timeout), drawn at random per request. We count, from the server's side and the table:
  lost        prompts without an answer at the end (finish_reason != stop),
  duplicated  prompts answered more than once by the server, plus duplicate rows in table or cache,
  slowdown    wall time over the same run without faults."""
import sqlite3, tempfile, time
from pathlib import Path
from fault_server import start_process, get_stats
from orbench_ml.runner import run_batch

MIX = {'429': 0.25, '500': 0.25, 'drop': 0.2, 'malformed': 0.15, 'timeout': 0.15}   # shares of the fault rate

def _run(n, latency, concurrency, faults, tag):
    proc, url = start_process(latency=latency, faults=faults, retry_after=0.2, hang=1.5, lifetime=600, seed=1)
    try:
        with tempfile.TemporaryDirectory() as d:
            cache = Path(d)/'replies.sqlite'
            prompts = [f'{tag} fault bench prompt {i}' for i in range(n)]
            t0 = time.perf_counter()
            df = run_batch(prompts, f'openai-compatible:bench-model@{url}/v1', cache=cache, concurrency=concurrency,
                           retries=12, timeout=1.0, backoff=0.1, progress=False)
            wall = time.perf_counter() - t0
            with sqlite3.connect(cache) as db: cache_rows = db.execute('SELECT count(*) FROM replies').fetchone()[0]
        s = get_stats(url)
    finally:
        proc.terminate(); proc.wait()
    answers = [s['prompts'].get(p, [0, 0])[1] for p in prompts]
    lost = int((df.finish_reason != 'stop').sum())
    duplicated = sum(a > 1 for a in answers) + int(df.prompt_id.duplicated().sum()) + max(0, cache_rows - n)
    return dict(wall=wall, lost=lost, duplicated=duplicated, requests=s['requests'], kinds=s['kinds'], run=df.attrs['run'])

def run(n=5000, rate=0.2, latency=0.1, concurrency=64, **_):
    n, rate, latency, concurrency = int(n), float(rate), float(latency), int(concurrency)
    clean = _run(n, latency, concurrency, {}, 'clean')
    faulty = _run(n, latency, concurrency, {k: rate*v for k, v in MIX.items()}, 'faulty')
    injected = sum(v for k, v in faulty['kinds'].items() if k != 'ok')
    return dict(lost=faulty['lost'], duplicated=faulty['duplicated'], slowdown=round(faulty['wall'] / clean['wall'], 3),
                n=n, fault_rate=rate, faults_injected=injected, requests=faulty['requests'], fault_kinds=faulty['kinds'],
                wall_s=round(faulty['wall'], 2), clean_wall_s=round(clean['wall'], 2),
                clean_lost=clean['lost'], clean_duplicated=clean['duplicated'])
