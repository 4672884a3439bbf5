"""Real models through litellm: streaming, retries, usage and cost, clean closing.

Strategy
--------
- litellm is imported on first use (:func:`load_litellm`), with
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` in the environment for the import
  only, unless the user set it (litellm reads it there, to take its bundled
  cost map instead of fetching one), and removed again afterwards: a
  library imported into someone's kernel leaves their environment as it
  found it.
- litellm's own retries (and the OpenAI SDK's) are switched off
  (``num_retries=0, max_retries=0``): we retry here, because only here do we
  know whether a token has already reached the parser. Before the first
  token a 429, 5xx, timeout or connection failure is retried with
  exponential backoff (honouring ``retry-after``); after it, the failure is
  raised as a mapped :class:`~cortex_kernel.exceptions.ModelError` that says
  the partial turn was discarded — the runtime never keeps a half-written
  turn.
- Two deadlines, each an anyio cancel scope around a single read (never
  around a ``yield``; none after the first token when httpx's own read
  timeout is that same limit): until the first token (content or a
  tool-call delta) the whole attempt — connecting, the headers, any empty chunks — must fit
  in ``first_token_timeout``; after it, each read must come within
  ``timeout``. A provider that accepts and never answers is an error after
  about ``first_token_timeout × (num_retries + 1)``. The defaults
  (:data:`DEFAULT_TIMEOUT`, :data:`DEFAULT_FIRST_TOKEN_TIMEOUT`,
  :data:`DEFAULT_RETRIES`) suit a hosted provider; a server on this machine
  (a loopback ``api_base``, or Ollama's default) gets
  :data:`LOCAL_FIRST_TOKEN_TIMEOUT` and no retries: a CPU model reads a long
  prompt for tens of seconds (its one slot queues the rest), and a retry
  would only wait behind the request it gave up on.
- A response that is not a stream of completion chunks (not JSON, an HTML
  page sent with 200, a stream that ends without a finish reason) is a
  :class:`~cortex_kernel.exceptions.ProviderProtocolError`, never retried:
  the provider answered, wrongly, and would again.
- For OpenAI-style providers the response litellm opened (through the
  OpenAI SDK, or its own HTTP handler when the user sets
  ``EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=true``) is read by
  :class:`~cortex_kernel.llm.sse.SSEEvents`: plain dicts, one network read
  at a time, instead of litellm's pydantic chunk objects (a fraction of
  their cost a chunk; figures in docs/benchmarks.md, from ``cortex-kernel
  bench llm``). Other providers stream through litellm's
  ``CustomStreamWrapper``.
- Native tool calls (``--protocol tools``) are handed to the parser one by
  one, each the moment it is complete in the stream
  (:meth:`~cortex_kernel.llm.function_calling.ToolCallAccumulator.ready`),
  as ``async`` actions: the tool starts while the model writes the next
  call, and the results still come back as tool messages in the next turn.
- :meth:`LiteLLMCompletion.aclose` closes the HTTP response itself. litellm's
  default aiohttp transport only *releases* a connection on close and goes
  on reading the body; the httpx transport really closes the socket, so we
  select it (``litellm.disable_aiohttp_transport``). The test suite checks
  that the server sees the disconnect.
- No object is frozen out of the garbage collector: litellm's ~300k
  objects stay visible to the cyclic collector (``gc.freeze`` would hide
  every object alive at that moment, the user's data included, for good),
  so a full collection walks them (a stall mid-stream, seen as p99 spikes
  in ``cortex-kernel bench llm``). A process that would rather
  spare it may call ``gc.freeze()`` itself after :func:`load_litellm`.
- Usage comes from the provider's final usage chunk (we ask for it with
  ``stream_options.include_usage``); a turn closed early gets an estimate
  from litellm's token counter. Cost is ``None`` for a model litellm does
  not price.
- Protocol-text turns may carry a GBNF grammar of the protocol
  (``constrain``, :mod:`cortex_kernel.llm.constrain`), in the request body
  as ``grammar`` (litellm's ``extra_body``). A server that refuses it is
  asked again without it, before any token: the turn goes on, with one
  ``warning`` (in :attr:`Completion.warnings`), and the model sends no
  grammar again.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio

from ..exceptions import ConfigError
from ..redaction import Redactor, redact, secret_values
from ..runtime.ports import Completion, CompletionRequest, Model, ToolCall, protocol_named
from ..runtime.run_events import Usage
from ..runtime.tool_calls import tool_calls_to_protocol
from .constrain import (
    constrain_mode,
    forget_support,
    grammar_for,
    grammar_refused,
    supports_grammar,
)
from .errors import MalformedStream, Phase, is_retryable, map_error, retry_after_seconds
from .function_calling import (
    CODE_REPLY_STOP,
    CodeReply,
    TextCallHold,
    ToolCallAccumulator,
    tools_for_provider,
)
from .sse import SSEEvents, sse_response

__all__ = ["LiteLLMModel", "load_litellm", "text_tokens"]

_configured = False
_lock = threading.Lock()

#: Seconds to connect, and between two chunks once tokens flow.
DEFAULT_TIMEOUT = 30.0
#: Seconds from the request to the first token, for a hosted provider.
DEFAULT_FIRST_TOKEN_TIMEOUT = 30.0
#: The same for a server on this machine (see the module's notes).
LOCAL_FIRST_TOKEN_TIMEOUT = 600.0
#: Extra attempts before the first token, for a hosted provider (0 on this machine).
DEFAULT_RETRIES = 2

_BASE_HANDLER_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"
_COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_FIRST_CALL_IMPORTS = (
    "openai.resources",
    "httpcore",
    "h11",
    "h2.connection",
    "tiktoken",
    # litellm's own HTTP handler path: its default tokenizer (read from disk
    # at import, ~0.3 s) and the proxy types its logging imports.
    "litellm.litellm_core_utils.default_encoding",
    "litellm.proxy._types",
    "litellm._service_logger",
    "litellm.llms.litellm_proxy",
)
#: Providers whose default endpoint is on this machine (when no api_base is set).
_LOCAL_PROVIDERS = {"ollama": "OLLAMA_API_BASE", "ollama_chat": "OLLAMA_API_BASE"}


def text_tokens(text: str) -> int:
    """Tokens of ``text`` by litellm's offline counter (its default tokenizer).

    Used for the ``max_tokens`` limit of context feeds; litellm is imported
    on the first call only.
    """
    return int(load_litellm().token_counter(text=text))


@contextlib.contextmanager
def _environment_for_import() -> Iterator[None]:
    """``LITELLM_LOCAL_MODEL_COST_MAP=True`` while litellm imports, unless the user set it.

    litellm reads it once, at import, to load its bundled cost map instead
    of fetching one; nothing reads it later, so it is removed again as soon
    as the import is done. A value the user set is theirs: left alone.
    """
    if _COST_MAP_ENV in os.environ:
        yield
        return
    os.environ[_COST_MAP_ENV] = "True"
    try:
        yield
    finally:
        os.environ.pop(_COST_MAP_ENV, None)


def load_litellm() -> Any:
    """Import litellm (once), offline-safe and quiet, and return the module.

    The process's environment is left as it was (see
    :func:`_environment_for_import`), and no object is frozen out of the
    garbage collector.
    """
    global _configured
    if _configured:
        return sys.modules["litellm"]
    with _lock:  # a warm-up thread and a first request may race here
        if _configured:
            return sys.modules["litellm"]
        with _environment_for_import():
            import litellm

        litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout
        litellm.telemetry = False
        # The aiohttp transport does not close the socket on aclose (the
        # provider goes on streaming, and billing); httpx's does.
        litellm.disable_aiohttp_transport = True
        # What the first request would import inside the first-token deadline
        # (2+ s on a busy 2-core machine): the OpenAI SDK's resources, the
        # HTTP stack and the tokenizer, which litellm loads on its first call.
        for module in _FIRST_CALL_IMPORTS:
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
        _configured = True
        return litellm


def litellm_base_handler() -> bool:
    """Whether litellm sends OpenAI-style calls through its own HTTP handler (not the SDK).

    The user's choice (``EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER``), read
    as litellm reads it on every call; unset, litellm uses the OpenAI SDK.
    """
    return os.environ.get(_BASE_HANDLER_ENV, "").strip().lower() == "true"


async def aload_litellm() -> Any:
    """:func:`load_litellm` without blocking the event loop.

    The first import takes seconds; in a kernel that would freeze the live
    view and the interrupt handling, so it runs in a worker thread.
    """
    if _configured:
        return sys.modules["litellm"]
    return await anyio.to_thread.run_sync(load_litellm)


class LiteLLMModel(Model):
    """Any litellm model string, streamed.

    Parameters
    ----------
    name
        A litellm model string: ``openai/gpt-4o-mini``,
        ``anthropic/claude-3-5-sonnet-latest``, ``ollama/llama3``… Keys are
        read from the environment as litellm reads them.
    api_base
        The endpoint, for OpenAI-compatible servers and proxies.
    api_key
        An explicit key; by default litellm reads the provider's variable
        (``OPENAI_API_KEY``…). Never shown in a message or a repr.
    timeout
        Seconds allowed to connect, and between two chunks once the first
        token came (:data:`DEFAULT_TIMEOUT`).
    first_token_timeout
        Seconds from sending the request to the first token; ``None``:
        :data:`DEFAULT_FIRST_TOKEN_TIMEOUT`, or :data:`LOCAL_FIRST_TOKEN_TIMEOUT`
        for a server on this machine.
    num_retries
        Extra attempts after a 429, 5xx, timeout or connection failure that
        happens before the first token; ``None``: :data:`DEFAULT_RETRIES`,
        or 0 for a server on this machine.
    backoff, max_backoff
        The first wait between attempts and its cap; the wait doubles each
        time. A provider's ``retry-after`` wins, up to ``max_retry_after``.
    protocol
        ``xml`` (default) or ``tools``: the default for requests (a
        request's own ``protocol`` is used when it says ``tools``).
    constrain
        ``auto`` (default), ``grammar`` or ``off``: whether protocol-text
        turns carry the protocol's GBNF grammar (``auto``: only to a server
        detected to take one; see :mod:`cortex_kernel.llm.constrain`).
    code_first
        ``auto`` (default), ``on`` or ``off``: whether the model answers
        requests for code alone (:attr:`Model.code_replies`; ``auto``: a
        server on this machine, where small models run).
    **options
        Passed to ``litellm.acompletion`` on every request (``temperature``,
        ``max_tokens``, ``extra_headers``…); a request's ``options`` win.
    """

    def __init__(  # noqa: PLR0913 - each model option is a keyword, as in ModelOptions
        self,
        name: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        first_token_timeout: float | None = None,
        num_retries: int | None = None,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        protocol: str = "xml",
        constrain: str | None = None,
        code_first: str | None = None,
        **options: Any,
    ) -> None:
        if not name or not name.strip():
            raise ConfigError("An empty model name: give a litellm model string (--model).")
        protocol = protocol_named(protocol)
        try:
            self.constrain = constrain_mode(constrain)
        except ValueError as exc:
            raise ConfigError(f"Model options: {exc} (--constrain).") from None
        if (
            timeout <= 0
            or (first_token_timeout is not None and first_token_timeout <= 0)
            or (num_retries is not None and num_retries < 0)
            or backoff < 0
        ):
            raise ConfigError(
                "Model options: timeout and first_token_timeout must be > 0, "
                "retries and backoff >= 0."
            )
        self.name = name.strip()
        self.api_base = api_base
        self.api_key = api_key
        self.local = self._local_endpoint()
        if code_first not in (None, "auto", "on", "off"):
            raise ConfigError(
                f"Model options: code_first must be auto, on or off, not {code_first!r} "
                "(--code-first)."
            )
        self.code_replies = code_first == "on" or (code_first in (None, "auto") and self.local)
        self.timeout = float(timeout)
        if first_token_timeout is None:
            first_token_timeout = (
                LOCAL_FIRST_TOKEN_TIMEOUT if self.local else DEFAULT_FIRST_TOKEN_TIMEOUT
            )
        self.first_token_timeout = float(first_token_timeout)
        if num_retries is None:
            num_retries = 0 if self.local else DEFAULT_RETRIES
        self.num_retries = int(num_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_retry_after = float(max_retry_after)
        self.protocol = protocol
        self.options = dict(options)
        # Why this model sends no grammar any more (a server refused one), if so.
        self.grammar_refused: str | None = None
        self._grammar_problem_told = False

    def __repr__(self) -> str:
        # No api_key here: reprs end up in logs and tracebacks.
        base = f", api_base={self.api_base!r}" if self.api_base else ""
        return (
            f"LiteLLMModel({self.name!r}{base}, timeout={self.timeout:g}, "
            f"first_token_timeout={self.first_token_timeout:g}, num_retries={self.num_retries})"
        )

    def limits(self) -> str:
        """The waiting rules in force, for ``%model``: ``first token within 30 s, …``."""
        where = " (a server on this machine)" if self.local else ""
        return (
            f"first token within {self.first_token_timeout:g} s, then {self.timeout:g} s "
            f"between chunks, {self.num_retries} retries{where}"
        )

    def stream(self, request: CompletionRequest) -> LiteLLMCompletion:
        """Open a streamed completion; the request is sent on first iteration."""
        return LiteLLMCompletion(self, request)

    def context_window(self) -> int | None:
        """Input tokens the model takes, from litellm's bundled model map; ``None`` if unknown."""
        if not hasattr(self, "_context_window"):
            litellm = load_litellm()
            try:
                info = litellm.get_model_info(self.name)
                value = info.get("max_input_tokens") or info.get("max_tokens")
            except Exception:  # an unknown or local model
                value = None
            self._context_window = value if isinstance(value, int) and value > 0 else None
        return self._context_window

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Dollars for these tokens from litellm's bundled price list, ``None`` if unpriced."""
        litellm = load_litellm()
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=self.name,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
        except Exception:  # an unknown model is not an error for the run
            return None
        return float(prompt_cost) + float(completion_cost)

    def count_tokens(self, *, messages: list[Any] | None = None, text: str | None = None) -> int:
        """Estimate tokens with litellm's counter (0 when it cannot)."""
        litellm = load_litellm()
        try:
            if messages is not None:
                return int(litellm.token_counter(model=self.name, messages=messages))
            return int(litellm.token_counter(model=self.name, text=text or ""))
        except Exception:  # estimation only: never fail a turn over it
            return 0

    def request_kwargs(
        self, request: CompletionRequest, grammar: str | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of ``litellm.acompletion`` for ``request``.

        ``grammar``: a GBNF grammar to send as the body's ``grammar`` field
        (see :meth:`grammar`).
        """
        kwargs: dict[str, Any] = {
            **self.options,
            **request.options,
            "model": self.name,
            # The outbound boundary: no secret (action results included) and
            # no unencodable surrogate ever reaches the provider.
            "messages": Redactor(secret_values((self.api_key,))).value(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            # Our own deadlines (see _generate) are the ones that fire; the HTTP
            # client's must not cut the wait for the first token short.
            "timeout": max(self.timeout, self.first_token_timeout),
            # Our retry loop is the only one: it knows whether tokens streamed.
            "num_retries": 0,
            "max_retries": 0,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        elif self._keyless_local_server():
            # llama.cpp, vLLM, Ollama on this machine take any key; litellm
            # insists on one, so the user need not invent it.
            kwargs["api_key"] = "no-key-needed"
        # A request for code alone offers no tools (see CompletionRequest.code_reply),
        # and ends at the code's closing fence: llama-cpp-python's server goes on
        # generating for a client that closed the stream, which then slowed the
        # next turn to a crawl on two cores (measured: under 1 token/s).
        offers = "tools" in (request.protocol, self.protocol) and not request.code_reply
        if request.code_reply:
            kwargs["stop"] = [CODE_REPLY_STOP]
        if request.tools and offers:
            kwargs["tools"] = tools_for_provider(request.tools)
            # litellm 1.106 routes any call with tools through its MCP gateway
            # check, which imports the optional `mcp` package and fails
            # without it; our tools are plain functions, never MCP servers.
            kwargs["_skip_mcp_handler"] = True
            offered = {tool["function"]["name"] for tool in kwargs["tools"]}
            if request.required_tool in offered:
                # A data question answered without a look, asked again: the
                # turn must call the tool that looks (OpenAI's named tool
                # choice, which llama.cpp's servers, vLLM and hosted APIs take).
                kwargs["tool_choice"] = {
                    "type": "function",
                    "function": {"name": request.required_tool},
                }
        if grammar is not None:
            kwargs["extra_body"] = {**(kwargs.get("extra_body") or {}), "grammar": grammar}
        return kwargs

    def _grammar_base(self) -> str | None:
        """The endpoint whose grammar support ``auto`` asks about (``None``: a hosted provider)."""
        if self.api_base:
            return self.api_base
        if self.name.startswith("openai/"):
            return os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL") or None
        return None

    async def grammar(self, request: CompletionRequest, warnings: list[str]) -> str | None:
        """The protocol grammar to send with ``request``, or ``None``.

        Only for a protocol-text request that carries its prompt context,
        under ``constrain`` (see :mod:`cortex_kernel.llm.constrain`). A
        grammar that fails the check is not sent; the first time, a line
        in ``warnings`` says why.
        """
        if (
            self.constrain == "off"
            or request.protocol != "xml"
            or request.context is None
            or self.grammar_refused is not None
        ):
            return None
        if self.constrain == "auto":
            base = self._grammar_base()
            if base is None or not await supports_grammar(base):
                return None
        # Built and checked off the event loop: ~0.2 s for 200 tools (then cached).
        grammar, problem = await anyio.to_thread.run_sync(
            grammar_for, request.context, (self.api_key,)
        )
        if problem is not None and not self._grammar_problem_told:
            self._grammar_problem_told = True
            warnings.append(
                f"the protocol grammar was not sent (it would not load in llama.cpp: {problem}); "
                "the model runs unconstrained"
            )
        return grammar

    def refuse_grammar(self, exc: BaseException) -> str:
        """Note that the server refused the grammar; return the warning for the user."""
        said = redact(str(exc), (self.api_key,))
        said = " ".join(said.split())[:300]
        self.grammar_refused = said
        base = self._grammar_base()
        if base is not None:
            forget_support(base, refused=True)
        where = f" at {base}" if base else ""
        return (
            f"the server{where} refused the protocol grammar ({said}); this turn was sent "
            "again without it, and so are the next ones (--constrain off stops sending it)"
        )

    def _keyless_local_server(self) -> bool:
        """An ``openai/`` model on a loopback endpoint with no key configured."""
        if not self.name.startswith("openai/") or os.environ.get("OPENAI_API_KEY", "").strip():
            return False
        base = self.api_base or os.environ.get("OPENAI_API_BASE") or ""
        return (urlsplit(base).hostname or "") in _LOOPBACK

    def _local_endpoint(self) -> bool:
        """Whether requests go to a server on this machine (a loopback endpoint)."""
        base = self.api_base
        provider = self.name.split("/", 1)[0] if "/" in self.name else ""
        if not base and provider == "openai":
            base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
        if not base and provider in _LOCAL_PROVIDERS:
            base = os.environ.get(_LOCAL_PROVIDERS[provider]) or "http://localhost:11434"
        return (urlsplit(base or "").hostname or "") in _LOOPBACK

    def retry_delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        told = retry_after_seconds(exc)
        if told is not None:
            return min(told, self.max_retry_after)
        return min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))


class LiteLLMCompletion(Completion):
    """One streamed completion of a :class:`LiteLLMModel`.

    Attributes
    ----------
    usage
        Filled when the stream ends or is closed.
    tool_calls
        The native tool calls of the turn (function-calling models): each
        added as it is handed to the parser, all of them in index order
        when the stream ends.
    attempts
        Requests made, retries included.
    content
        The model's own text so far (without synthesized tool-call actions).
    finish_reason
        The provider's finish reason, when it sent one.
    """

    def __init__(self, model: LiteLLMModel, request: CompletionRequest) -> None:
        self._usage = Usage()
        self._final_usage: Usage | None = None
        super().__init__()
        self.model = model
        self.request = request
        self.attempts = 0
        self._fallbacks = 0  # requests sent again without the grammar (not retries)
        self.finish_reason: str | None = None
        self._parts: list[str] = []
        self._chars = 0
        self._tools = ToolCallAccumulator()
        self._provider_usage: tuple[int, int] | None = None
        self._prompt_estimate: int | None = None
        self._stream: Any = None
        self._events: SSEEvents | None = None  # when the response is read here (see _reader)
        self._reads_timed = False  # the HTTP client times each read with `timeout`
        self._agen: AsyncGenerator[str, None] | None = None
        # Text that may be tool calls written as text (tools protocol).
        names = [t.get("function", t).get("name", "") for t in request.tools or []]
        code_tool = request.code_tool if request.code_tool in names else None
        self._hold = TextCallHold(names, code_tool=code_tool)
        reply = request.code_reply
        self._code = CodeReply(reply) if reply is not None and reply in names else None
        self._coded = False  # the reply's code was made a call
        self._closed = False
        self._opened = False
        self._started = 0.0

    @property
    def usage(self) -> Usage:
        """What the turn consumed so far: the provider's figures, or an estimate.

        A property because the runtime reads it right after cutting the turn
        at a sync action, before :meth:`aclose`: it must already count the
        prompt and the tokens read.
        """
        if self._final_usage is not None:
            return self._final_usage
        if not self._opened:
            return self._usage
        return self._measure()

    @usage.setter
    def usage(self, value: Usage) -> None:
        self._usage = value

    @property
    def content(self) -> str:
        """The model's own text streamed so far."""
        return "".join(self._parts)

    def __aiter__(self) -> AsyncIterator[str]:
        if self._agen is None:
            self._agen = self._generate()
        return self._agen

    async def aclose(self) -> None:
        """Stop reading and close the HTTP response now; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._agen is not None:
            # RuntimeError: the generator is mid-await in another task;
            # closing the stream below makes that await fail promptly instead.
            with contextlib.suppress(RuntimeError):
                await self._agen.aclose()
        await self._close_stream()
        self._finalize_usage()

    # -- the stream ----------------------------------------------------------

    async def _generate(self) -> AsyncGenerator[str, None]:
        model = self.model
        litellm = await aload_litellm()
        grammar = await model.grammar(self.request, self.warnings)
        kwargs = model.request_kwargs(self.request, grammar)
        self._started = time.perf_counter()
        try:
            while not self._closed:
                self.attempts += 1
                phase: Phase = "request"
                first_token_by = anyio.current_time() + model.first_token_timeout
                try:
                    with anyio.fail_after(model.first_token_timeout):
                        self._stream = await litellm.acompletion(**kwargs)
                    self._opened = True
                    read = self._reader(self._stream)
                    while True:
                        phase = "stream"
                        text = await self._read(read, first_token_by)
                        phase = "request"  # what follows is our code, not the provider's bytes
                        if text is None:
                            self._check_finished()
                            break
                        if text:
                            self._parts.append(text)
                            self._chars += len(text)
                            if self._code is not None:
                                if not self._coded and (call := self._code.feed(text)):
                                    # The code is complete: it runs now, while
                                    # the server ends the reply (see request_kwargs).
                                    yield self._code_call(call)
                            elif not self._text_calls_possible():
                                yield text
                            elif shown := self._hold.release(text):
                                yield shown
                        if self._tools and (ready := self._tools.ready()):
                            # Each call starts the moment it is complete, while
                            # the model may still be writing the next one.
                            self.tool_calls.extend(ready)
                            yield tool_calls_to_protocol(ready, self.request.tools)
                    break
                except Exception as exc:
                    await self._close_stream()
                    before_first_token = not self._got_token()
                    if grammar is not None and before_first_token and grammar_refused(exc):
                        # The server cannot take the grammar: the same turn without it.
                        self.warnings.append(model.refuse_grammar(exc))
                        grammar = None
                        kwargs = model.request_kwargs(self.request)
                        self._fallbacks += 1
                        self._provider_usage = None
                        continue
                    if (
                        before_first_token
                        and self.attempts - self._fallbacks <= model.num_retries
                        and is_retryable(exc, phase=phase)
                    ):
                        await anyio.sleep(model.retry_delay(self.attempts, exc))
                        self._provider_usage = None
                        continue
                    raise map_error(
                        exc,
                        model=model.name,
                        attempts=self.attempts,
                        timeout=model.first_token_timeout if before_first_token else model.timeout,
                        timeout_option="first_token_timeout" if before_first_token else "timeout",
                        api_base=model.api_base,
                        api_key=model.api_key,
                        streamed_chars=self._chars,
                        phase=phase,
                    ) from None  # the original may quote secrets; ours is redacted
            if last := self._at_stream_end():
                yield last
        finally:
            await self._close_stream()
            self._finalize_usage()

    def _at_stream_end(self) -> str:
        """The text still to hand on when the stream has ended (and set :attr:`tool_calls`)."""
        if self._tools:
            # The calls still open (arguments that are no whole JSON object
            # are passed as written: the parser reports them).
            open_calls = self._tools.rest()
            self.tool_calls = self._tools.calls()
            return tool_calls_to_protocol(open_calls, self.request.tools) if open_calls else ""
        if self._code is not None:
            # The transcript keeps the reply; the history, the call alone.
            self.written = self.content
            if self._coded:
                return ""
            call = self._code.finish()  # a block the stop sequence cut before its fence
            return self._code_call(call) if call is not None else ""
        if not self._text_calls_possible():
            return ""
        # A server that returned its model's calls as text (see block_tool_calls).
        self.tool_calls, rest = self._hold.finish()
        if not self.tool_calls:
            return rest
        # The calls' text was held back (and whatever the model imagined after
        # them): the history gets the calls once, as tool_calls; the
        # transcript keeps what the model wrote.
        self.written = self.content
        return tool_calls_to_protocol(self.tool_calls, self.request.tools)

    def _code_call(self, call: ToolCall) -> str:
        """The protocol text of the call a reply of code makes.

        With function calling it is the turn's native call; in protocol text
        the action is the turn's text, as if the model had written it.
        """
        self._coded = True
        if self.request.protocol == "tools":
            self.tool_calls = [call]
        return tool_calls_to_protocol([call], self.request.tools)

    def _text_calls_possible(self) -> bool:
        return bool(self.request.tools) and self.request.protocol == "tools" and not self._tools

    def _got_token(self) -> bool:
        """Whether the first token (text or a tool-call delta) has come."""
        return bool(self._chars or self._tools)

    def _reader(self, stream: Any) -> Callable[[], Awaitable[str | None]]:
        """What reads the next text: from the HTTP response itself when litellm allows.

        See :mod:`cortex_kernel.llm.sse`: for litellm's own OpenAI
        chat-completions iterator the bytes are read here (one network read
        at a time, plain dicts); anything else goes through litellm's stream
        wrapper, one chunk object at a time.
        """
        self._events = None
        self._reads_timed = False
        response = sse_response(stream)
        if response is not None:
            self._events = SSEEvents(response)
            # httpcore times every network read with the request's read
            # timeout (max(timeout, first_token_timeout), see request_kwargs):
            # when that equals `timeout` (a hosted provider's defaults), the
            # limit between chunks is already enforced, a cancel scope less
            # per chunk. It raises httpx.ReadTimeout, mapped like ours.
            limits = getattr(response.request, "extensions", {}).get("timeout", {})
            read_limit = limits.get("read") if isinstance(limits, dict) else None
            self._reads_timed = (
                isinstance(read_limit, int | float) and read_limit <= self.model.timeout
            )
            return self._read_events
        iterator = stream.__aiter__()

        async def read_chunk() -> str | None:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return None
            return self._absorb(chunk)

        return read_chunk

    async def _read(self, read: Callable[[], Awaitable[str | None]], first_token_by: float) -> Any:
        """The next text (``""`` for a chunk without any), or ``None`` at the end.

        Until the first token the attempt's deadline applies (the provider
        may send empty chunks while it reads the prompt); after it, each
        read gets the model's ``timeout``: one cancel scope per read (a
        bare ``CancelScope``; ``fail_after`` adds a generator-based context
        manager to every chunk), or none when the HTTP client's own read
        timeout is that same limit (see :meth:`_reader`).
        """
        if self._got_token():
            if self._reads_timed:
                return await read()
            deadline = anyio.current_time() + self.model.timeout
        else:
            deadline = first_token_by
        with anyio.CancelScope(deadline=deadline):
            return await read()
        # Only our own deadline is swallowed by the scope: an outer
        # cancellation propagates, so reaching this line means the time is up.
        raise TimeoutError

    async def _read_events(self) -> str | None:
        """The text of the events of the next network read (see :class:`SSEEvents`)."""
        events = await self._events.next_events()  # type: ignore[union-attr]
        if events is None:
            return None
        return "".join([self._absorb_event(event) for event in events])

    def _absorb_event(self, event: dict[str, Any]) -> str:
        """:meth:`_absorb` for an event as the provider sent it (a dict)."""
        self._tools.next_chunk()
        usage = event.get("usage")
        if usage:
            prompt = usage.get("prompt_tokens")
            completion = usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self._provider_usage = (prompt, completion)
        choices = event.get("choices")
        if not choices:
            return ""
        choice = choices[0]
        reason = choice.get("finish_reason")
        if reason:
            self.finish_reason = str(reason)
        delta = choice.get("delta")
        if not delta:
            return ""
        calls = delta.get("tool_calls")
        if calls:
            self._tools.add(calls)
        content = delta.get("content")
        return content if isinstance(content, str) else ""

    def _check_finished(self) -> None:
        """A stream that ended without the provider's finish reason was not a whole answer.

        litellm puts a ``stop`` on every stream it ends; its wrapper keeps
        whether the provider itself sent one. An HTML page sent with 200, a
        JSON object or a cut-off stream all end without it.
        """
        if self._events is not None:
            if self.finish_reason:
                return
            kind = self._events.content_type
            raise MalformedStream(
                "the stream ended without a finish reason"
                + (f" after {self._chars} characters" if self._got_token() else ", with no chunk")
                + _not_sse(kind)
            )
        stream = self._stream
        if stream is None or not hasattr(stream, "received_finish_reason"):
            return  # not litellm's stream wrapper: nothing to tell from
        if stream.received_finish_reason or getattr(stream, "intermittent_finish_reason", None):
            return
        raise MalformedStream(
            "the stream ended without a finish reason"
            + (f" after {self._chars} characters" if self._got_token() else ", with no chunk")
            + _content_type(stream)
        )

    def _absorb(self, chunk: Any) -> str:
        """Take usage, tool-call deltas and the finish reason; return the content text."""
        self._tools.next_chunk()
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            prompt = getattr(usage, "prompt_tokens", None)
            completion = getattr(usage, "completion_tokens", None)
            if isinstance(prompt, int) and isinstance(completion, int):
                self._provider_usage = (prompt, completion)
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return ""
        choice = choices[0]
        reason = getattr(choice, "finish_reason", None)
        if reason:
            self.finish_reason = str(reason)
        delta = getattr(choice, "delta", None)
        if delta is None:
            return ""
        calls = getattr(delta, "tool_calls", None)
        if calls:
            self._tools.add(calls)
        content = getattr(delta, "content", None)
        return content if isinstance(content, str) else ""

    async def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        # Shielded: a cancelled run must still release the connection.
        with anyio.CancelScope(shield=True):
            # Closing is best effort: the socket is gone either way.
            with contextlib.suppress(Exception):
                await stream.aclose()

    def _finalize_usage(self) -> None:
        if self._final_usage is None and self._opened:
            self._final_usage = self._measure()

    def _measure(self) -> Usage:
        if self._provider_usage is not None:
            prompt, completion = self._provider_usage
        else:
            # Closed early (a sync action) or a provider without usage chunks.
            if self._prompt_estimate is None:
                self._prompt_estimate = self.model.count_tokens(messages=self.request.messages)
            prompt = self._prompt_estimate
            completion = self.model.count_tokens(text=self.content) if self._chars else 0
        return Usage(
            turns=1,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=self.model.cost(prompt, completion),
            seconds=time.perf_counter() - self._started,
        )


def _content_type(stream: Any) -> str:
    """``; its content-type is text/html…`` for a response that is not SSE, else ``""``."""
    hidden = getattr(stream, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    kind = headers.get("llm_provider-content-type") if isinstance(headers, dict) else None
    return _not_sse(kind)


def _not_sse(kind: object) -> str:
    """``; its content-type is text/html…`` for a content type that is not SSE, else ``""``."""
    if not isinstance(kind, str) or not kind or "event-stream" in kind:
        return ""
    return f"; its content-type is {kind.split(';')[0]}, not text/event-stream"
