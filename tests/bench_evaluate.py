"""The main job on the whole of the default release (v2) with the keyword baseline, through papermill: a cold run (empty
caches and results), then the same run again. Figures: seconds of each and the model calls of the second."""
import json, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def _run(env, out):
    start = time.perf_counter()
    r = subprocess.run([sys.executable, '-m', 'papermill', str(ROOT/'nbs'/'06_evaluate.ipynb'), str(out),
                        '--cwd', str(ROOT/'nbs'), '-p', 'model', 'keyword-baseline'], env=env, capture_output=True, text=True)
    if r.returncode: raise SystemExit(f'06_evaluate failed:\n{r.stderr[-3000:]}')
    return time.perf_counter() - start

def run(**_):
    tmp = Path(tempfile.mkdtemp(prefix='bench_evaluate_'))
    env = dict(os.environ, ORBENCH_RESULTS=str(tmp/'results'), ORBENCH_FIGURES=str(tmp/'figures'), ORBENCH_CACHE=str(tmp/'cache'))
    cold = _run(env, tmp/'cold.ipynb')
    cached = _run(env, tmp/'cached.ipynb')
    run_json = json.loads((tmp/'results'/'keyword-baseline'/'v2'/'run.json').read_text())
    return dict(prompts=run_json['prompts'], cold_s=round(cold, 2), cached_s=round(cached, 2),
                calls_second_run=run_json['requests'])
