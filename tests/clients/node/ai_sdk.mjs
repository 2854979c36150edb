// Drives the official `ai` chat engine (AbstractChat + DefaultChatTransport, the code
// path of useChat) against agentd, headless. Usage:
//   node ai_sdk.mjs <scenario> <json options>
// Scenarios: send, tool, approval, resume. Prints one JSON report on stdout.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';

// Every distinct text the assistant message showed while it streamed, in order (the
// text parts joined), as the UI would have rendered it.
const partials = [];
function note(m) {
  if (m?.role !== 'assistant') return;
  const text = m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  if (text && partials.at(-1) !== text) partials.push(text);
}

class State {
  constructor() { this.status = 'ready'; this.error = undefined; this.messages = []; }
  pushMessage(m) { note(m); this.messages = [...this.messages, m]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { note(m); const copy = [...this.messages]; copy[i] = m; this.messages = copy; }
  snapshot(v) { return structuredClone(v); }
}

class NodeChat extends AbstractChat {
  constructor(options) { super({ ...options, state: new State() }); }
}

const [scenario, raw] = process.argv.slice(2);
const options = JSON.parse(raw);
const errors = [];
const finished = [];

function chat(extra = {}) {
  return new NodeChat({
    id: options.thread,
    transport: new DefaultChatTransport({
      api: `${options.url}/v1/ai-sdk/chat`,
      headers: { authorization: `Bearer ${options.key}`, 'x-agentd-agent': options.agent },
    }),
    onError: (e) => errors.push(String(e?.message ?? e)),
    onFinish: ({ isError, isAbort }) => finished.push({ isError, isAbort }),
    ...extra,
  });
}

async function until(predicate, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let engine;
if (scenario === 'send') {
  engine = chat();
  await engine.sendMessage({ text: options.text });
} else if (scenario === 'tool') {
  // A client-side tool: its output goes back with the next request automatically.
  engine = chat({
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      engine.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: options.output });
    },
  });
  await engine.sendMessage({ text: options.text });
  await until(() => engine.status === 'ready' && engine.messages.at(-1)?.parts.some((p) => p.type === 'text' && p.text === options.final), 'the final answer');
} else if (scenario === 'approval') {
  engine = chat({ sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
  await engine.sendMessage({ text: options.text });
  const part = engine.messages.at(-1).parts.find((p) => p.state === 'approval-requested');
  if (!part) throw new Error(`no approval requested: ${JSON.stringify(engine.messages.at(-1))}`);
  await engine.addToolApprovalResponse({ id: part.approval.id, approved: options.approved, reason: options.reason });
  await until(() => engine.status === 'ready' && engine.messages.at(-1)?.parts.some((p) => p.type === 'text' && p.text === options.final), 'the answer after the approval');
} else if (scenario === 'resume') {
  engine = chat();
  await engine.resumeStream();
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify({ status: engine.status, errors, finished, messages: engine.messages, partials }));
