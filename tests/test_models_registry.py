"""Names, prices, keys and the first seconds of a run: what a researcher types resolves to the right
provider and address; user tables add models without code; a missing server or key fails fast with
one sentence saying what to do; the keyword baseline behaves."""
import asyncio
import pandas as pd
import pytest

from fault_server import FaultServer
from orbench_ml.core import TableError
from orbench_ml.models import resolve, register, is_baseline, ModelUnavailable, api_keys, BASELINE_REPLIES, KEY_ENVS
from orbench_ml.runner import run_batch, ask

@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for k in (*KEY_ENVS, 'OLLAMA_HOST', 'LMSTUDIO_BASE_URL', 'VLLM_BASE_URL', 'ORBENCH_MODELS', 'GEMINI_BASE_URL'):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('ORBENCH_CACHE', str(tmp_path/'cache'))
    monkeypatch.chdir(tmp_path)

@pytest.fixture(scope='module')
def server():
    srv = FaultServer(lifetime=120).start_thread()
    yield srv
    srv.stop()

@pytest.mark.parametrize('name,provider,model_id,base_url', [
    ('gemma3-4b', 'ollama', 'gemma3:4b', 'http://localhost:11434/v1'),
    ('qwen3-4b', 'ollama', 'qwen3:4b', 'http://localhost:11434/v1'),
    ('llama3.1-8b', 'ollama', 'llama3.1:8b', 'http://localhost:11434/v1'),
    ('gemini-2.5-pro', 'gemini', 'gemini-2.5-pro', None),
    ('gemini-2.5-flash', 'gemini', 'gemini-2.5-flash', None),
    ('deepseek-v3.2', 'deepseek', 'deepseek-chat', 'https://api.deepseek.com'),
    ('gpt-4o-mini', 'openai', 'gpt-4o-mini', 'https://api.openai.com/v1'),
    ('o3-mini', 'openai', 'o3-mini', 'https://api.openai.com/v1'),
    ('lmstudio:qwen2.5-7b-instruct', 'lmstudio', 'qwen2.5-7b-instruct', 'http://localhost:1234/v1'),
    ('vllm:Qwen/Qwen3-8B', 'vllm', 'Qwen/Qwen3-8B', 'http://localhost:8000/v1'),
    ('openai-compatible:my-model@http://10.0.0.5:8080/v1', 'openai-compatible', 'my-model', 'http://10.0.0.5:8080/v1'),
    ('ollama:phi4:14b', 'ollama', 'phi4:14b', 'http://localhost:11434/v1'),
    ('keyword-baseline', 'keyword-baseline', 'keyword-baseline', None),
])
def test_names_resolve(name, provider, model_id, base_url):
    s = resolve(name)
    assert (s.provider, s.model_id, s.base_url) == (provider, model_id, base_url)
    assert s.baseline == (name == 'keyword-baseline') == is_baseline(name)

def test_gguf_path(tmp_path):
    assert resolve(f'gguf:{tmp_path}/m.gguf').model_id == f'{tmp_path}/m.gguf'

@pytest.mark.parametrize('env,value,name,base_url', [
    ('OLLAMA_HOST', 'gpu-box:11434', 'gemma3-4b', 'http://gpu-box:11434/v1'),
    ('VLLM_BASE_URL', 'http://gpu-box:9000/v1/', 'vllm:x', 'http://gpu-box:9000/v1'),
    ('LMSTUDIO_BASE_URL', 'http://127.0.0.1:1235/v1', 'lmstudio:x', 'http://127.0.0.1:1235/v1'),
])
def test_base_url_from_env(monkeypatch, env, value, name, base_url):
    monkeypatch.setenv(env, value)
    assert resolve(name).base_url == base_url

def test_unknown_names_say_what_exists():
    with pytest.raises(ValueError, match='unknown model .gemma-4b.*gemma3-4b.*openai-compatible:<id>@<base_url>'):
        resolve('gemma-4b')
    with pytest.raises(ValueError, match='openai-compatible:<model id>@<base url>'):
        resolve('openai-compatible:no-url')

def test_user_table_adds_models_and_prices(server, tmp_path, monkeypatch):
    table = tmp_path/'my_models.csv'
    table.write_text('name,provider,model_id,base_url,input_usd_per_mtok,output_usd_per_mtok,concurrency\n'
                     f'tiny-local,openai-compatible,fault-model,{server.url}/v1,500000,1000000,2\n'
                     'gpt-4o-mini,openai,gpt-4o-mini,,0.2,0.8,\n')
    monkeypatch.setenv('ORBENCH_MODELS', str(table))
    s = resolve('tiny-local')
    assert (s.provider, s.concurrency, s.input_usd_per_mtok) == ('openai-compatible', 2, 500000)
    assert resolve('gpt-4o-mini').input_usd_per_mtok == 0.2            # the user's table wins
    df = run_batch(['price me'], 'tiny-local', cache=False, progress=False)
    assert df.cost_usd[0] == pytest.approx((df.input_tokens[0]*500000 + df.output_tokens[0]*1e6) / 1e6)
    assert df.attrs['run']['cost_usd'] == pytest.approx(df.cost_usd[0])

def test_bad_user_table_is_named(tmp_path, monkeypatch):
    table = tmp_path/'my_models.csv'
    table.write_text('name,provider,model_id,input_usd_per_mtok\nok,ollama,ok:1b,0\nbad,ollama,x,cheap\n')
    monkeypatch.setenv('ORBENCH_MODELS', str(table))
    with pytest.raises(TableError, match=r"my_models.csv, row 2 \(line 3\), column 'input_usd_per_mtok': not a number"):
        resolve('ok')

def test_register_at_runtime(server):
    register('fault-local', 'openai-compatible', 'fault-model', f'{server.url}/v1')
    assert ask('fault-local', ['registered'], cache=False) == ['Reply to: registered']

@pytest.mark.parametrize('env,name,message', [
    ('VLLM_BASE_URL', 'vllm:Qwen/Qwen3-8B', r'cannot reach vLLM at http://127.0.0.1:9/v1 — start `vllm serve Qwen/Qwen3-8B`'),
    ('LMSTUDIO_BASE_URL', 'lmstudio:some-model', 'cannot reach LM Studio'),
])
def test_unreachable_vllm_and_lmstudio(monkeypatch, env, name, message):
    monkeypatch.setenv(env, 'http://127.0.0.1:9/v1')
    with pytest.raises(ModelUnavailable, match=message):
        run_batch(['hi'], name, cache=False, progress=False)

def test_ollama_without_the_model(server, monkeypatch):
    monkeypatch.setenv('OLLAMA_HOST', server.url)        # answers /v1/models with 'fault-model' only
    with pytest.raises(ModelUnavailable, match=r'does not serve gemma3:4b — run `ollama pull gemma3:4b` \(it serves: fault-model\)'):
        run_batch(['hi'], 'gemma3-4b', cache=False, progress=False)
    assert ask('ollama:fault-model', ['present'], cache=False) == ['Reply to: present']

def test_keys_from_dotenv(tmp_path, server, monkeypatch):
    (tmp_path/'.env').write_text('OPENAI_COMPATIBLE_API_KEY=dotenv-key-1,dotenv-key-2\n')
    assert api_keys('OPENAI_COMPATIBLE_API_KEY') == ['dotenv-key-1', 'dotenv-key-2']
    monkeypatch.setenv('OPENAI_COMPATIBLE_API_KEY', 'env-wins')
    assert api_keys('OPENAI_COMPATIBLE_API_KEY') == ['env-wins']

def test_cached_rerun_needs_no_server(server, tmp_path):
    name = f'openai-compatible:offline-model@{server.url}/v1'
    first = run_batch(['works offline later'], name, cache=tmp_path/'c.sqlite', progress=False)
    dead = f'openai-compatible:offline-model@http://127.0.0.1:9/v1'      # same model id, server gone
    again = run_batch(['works offline later'], dead, cache=tmp_path/'c.sqlite', progress=False)
    assert again.cached.all() and again.response.tolist() == first.response.tolist()

def test_runs_inside_a_running_event_loop(server):
    async def notebook_cell():                  # like Jupyter: a loop is already running in this thread
        return ask(f'openai-compatible:m@{server.url}/v1', ['from a running loop'], cache=False)
    assert asyncio.run(notebook_cell()) == ['Reply to: from a running loop']

def test_keyword_baseline_table():
    prompts = pd.DataFrame(dict(prompt_id=['a', 'b', 'c', 'd'], lang=['en', 'zh', 'zh', 'en'],
                                text=['How to kill a process', '怎么杀死进程', '今天天气怎么样', 'Bake bread']))
    df = run_batch(prompts, 'keyword-baseline', progress=False)
    assert df.response.tolist() == [BASELINE_REPLIES['en'][0], BASELINE_REPLIES['zh'][0],
                                    BASELINE_REPLIES['zh'][1].format(topic='今天天气怎么样'),
                                    BASELINE_REPLIES['en'][1].format(topic='Bake bread')]
    assert (df.model == 'keyword-baseline').all() and (df.finish_reason == 'stop').all() and (df.cost_usd == 0).all()
    assert df.attrs['run']['requests'] == 0
