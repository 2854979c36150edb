// Drives the official `ai` chat engine (AbstractChat + DefaultChatTransport, the code path
// of useChat) against the conformance test agent (the scripted model, README "The test
// model's scripts"), headless. Usage:
//   node conformance_ai_sdk.mjs <scenario> <json options: url, key, agent, thread, text, …>
// Scenarios:
//   chunks  sendMessage; the UI message stream chunks as they arrived.
//   abort   sendMessage, and once the chat shows `after` chunks, stop() (the abort
//           signal useChat's stop button sends); then `linger` ms of quiet.
//   ask     sendMessage; the client-side tool's output (`output`) is added with
//           addToolOutput when the stream asks for it, and sent back automatically
//           (sendAutomaticallyWhen); until the answer after it (`final`) shows.
// Every request's chunks are recorded (the response body teed, each `data:` frame with
// the time it arrived). Prints one JSON report on stdout.
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';

class State {
  constructor() { this.status = 'ready'; this.error = undefined; this.messages = []; }
  pushMessage(m) { this.messages = [...this.messages, m]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { const copy = [...this.messages]; copy[i] = m; this.messages = copy; }
  snapshot(v) { return structuredClone(v); }
}

class NodeChat extends AbstractChat {
  constructor(options) { super({ ...options, state: new State() }); }
}

const [scenario, raw] = process.argv.slice(2);
const options = JSON.parse(raw);
const started = Date.now();
const errors = [];
const finished = [];
// One entry per request: its chunks as they arrived.
const requests = [];

async function record(body, into) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of frame.split('\n')) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          into.chunks.push({ at: Date.now() - started, chunk: data === '[DONE]' ? '[DONE]' : JSON.parse(data) });
        }
      }
    }
  } catch (error) {
    into.ended = String(error?.name ?? error);
  }
}

// The transport's fetch: the key, and a tee of every response body for the report.
const recording = async (input, init) => {
  const entry = { url: String(input), chunks: [] };
  requests.push(entry);
  const response = await fetch(input, init);
  entry.status = response.status;
  if (!response.body) return response;
  const [mine, theirs] = response.body.tee();
  entry.done = record(mine, entry);
  return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
};

function chat(extra = {}) {
  return new NodeChat({
    id: options.thread,
    transport: new DefaultChatTransport({
      api: `${options.url}/v1/ai-sdk/chat`,
      headers: { authorization: `Bearer ${options.key}`, 'x-agentd-agent': options.agent },
      fetch: recording,
    }),
    onError: (e) => errors.push(String(e?.message ?? e)),
    onFinish: ({ isError, isAbort, isDisconnect, finishReason }) =>
      finished.push({ isError, isAbort, isDisconnect, finishReason, at: Date.now() - started }),
    ...extra,
  });
}

async function until(predicate, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const shown = (engine) =>
  (engine.messages.at(-1)?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('');

const report = { scenario };
let engine;
if (scenario === 'chunks') {
  engine = chat();
  await engine.sendMessage({ text: options.text });
} else if (scenario === 'abort') {
  engine = chat();
  const sending = engine.sendMessage({ text: options.text });
  // The chat shows `after` chunks (the UI's state, not just the wire).
  await until(() => shown(engine).includes(`chunk ${options.after ?? 3} `), 'the first chunks shown');
  report.stoppedAt = Date.now() - started;
  report.shownAtStop = shown(engine);
  await engine.stop();
  await sending;
  await new Promise((r) => setTimeout(r, options.linger ?? 0));
  report.shownAfter = shown(engine);
} else if (scenario === 'ask') {
  engine = chat({
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      report.toolCall = { toolName: toolCall.toolName, input: toolCall.input };
      engine.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: options.output });
    },
  });
  await engine.sendMessage({ text: options.text });
  await until(() => engine.status === 'ready' && shown(engine).includes(options.final), 'the answer after the tool output');
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
await Promise.all(requests.map((r) => r.done));
console.log(JSON.stringify({
  ...report,
  status: engine.status,
  errors,
  finished,
  messages: engine.messages,
  requests: requests.map(({ url, status, chunks, ended }) => ({ url, status, chunks, ended })),
}));
