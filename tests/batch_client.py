"""A batch-mode run in a process of its own, to be killed and resumed: the SIGKILL test and `bench.py batch`.

    python tests/batch_client.py URL CACHE N [per_batch] [poll]
asks `openai-compatible:bench-model@URL/v1` N generated prompts through the batch API. It prints a JSON line
once its imports are done (`imported_cpu_s`), and one at the end: prompts answered, the run summary, and
the CPU seconds of the run itself (`work_cpu_s`, imports excluded)."""
import json, sys, time

from orbench_ml.batch import run_batch_mode, BatchLimits, LIMITS

IMPORTED_CPU_S = time.process_time()

def prompts(n:int)->list[str]: return [f'bench prompt {i}: how do I kill a stuck process on my server?' for i in range(n)]

def model(url:str)->str: return f'openai-compatible:bench-model@{url}/v1'

def main(url,                                  # the fake's base URL
         cache,                                # the reply cache file
         n,                                    # prompts to ask
         per_batch=LIMITS['openai'].requests,  # the most requests in one batch
         poll=0.05):                           # the first wait between polls
    "Ask `n` prompts in batch mode; print a JSON line after the imports and one at the end"
    print(json.dumps(dict(imported_cpu_s=round(IMPORTED_CPU_S, 3))), flush=True)
    df = run_batch_mode(prompts(int(n)), model(url), cache=cache, poll=float(poll), max_poll=0.5, progress=False,
                        limits=BatchLimits(int(per_batch), LIMITS['openai'].bytes))
    print(json.dumps(dict(answered=int((df.finish_reason == 'stop').sum()), run=df.attrs['run'], work_cpu_s=round(time.process_time() - IMPORTED_CPU_S, 3))))

if __name__ == '__main__': main(*sys.argv[1:])
