// Drives the official AG-UI HttpAgent (@ag-ui/client) against agentd, headless.
//   node ag_ui.mjs <scenario> <json options>
// Scenarios: send (one user message), tool (a frontend tool answered with a tool
// message and a second run), abort (disconnect mid-run). Prints one JSON report.
import { HttpAgent } from '@ag-ui/client';

const [scenario, raw] = process.argv.slice(2);
const options = JSON.parse(raw);
const seen = [];
const runErrors = [];
const failures = [];

function agent(messages) {
  return new HttpAgent({
    url: `${options.url}/v1/ag-ui`,
    headers: { authorization: `Bearer ${options.key}` },
    threadId: options.thread,
    initialMessages: messages,
  });
}

// Every distinct text the run's assistant messages showed while they streamed, in order.
const partials = [];
const subscriber = {
  onEvent: ({ event }) => { seen.push(event.type); },
  onMessagesChanged: ({ messages }) => {
    const text = messages.filter((m) => m.role === 'assistant' && typeof m.content === 'string').map((m) => m.content).join('');
    if (text && partials.at(-1) !== text) partials.push(text);
  },
  onRunErrorEvent: ({ event }) => { runErrors.push(event.message); },
  onRunFailed: ({ error }) => { failures.push(String(error?.message ?? error)); },
};

let runner = agent([{ id: 'u1', role: 'user', content: options.text }]);
const forwardedProps = { agent: options.agent };
if (scenario === 'send') {
  await runner.runAgent({ runId: 'run-1', forwardedProps }, subscriber).catch((e) => failures.push(String(e.message)));
} else if (scenario === 'tool') {
  const tools = [{ name: options.tool, description: 'A frontend tool.', parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
  await runner.runAgent({ runId: 'run-1', tools, forwardedProps }, subscriber).catch((e) => failures.push(String(e.message)));
  const call = runner.messages.flatMap((m) => m.toolCalls ?? []).at(-1);
  if (!call) throw new Error(`no tool call: ${JSON.stringify(runner.messages)}`);
  runner.addMessage({ id: 'tool-1', role: 'tool', toolCallId: call.id, content: options.output });
  await runner.runAgent({ runId: 'run-2', tools, forwardedProps }, subscriber).catch((e) => failures.push(String(e.message)));
} else if (scenario === 'abort') {
  const run = runner.runAgent({ runId: 'run-1', forwardedProps }, {
    ...subscriber,
    onTextMessageStartEvent: () => {},
    onStepStartedEvent: () => { setTimeout(() => runner.abortRun(), 300); },
  }).catch((e) => failures.push(String(e.message)));
  await run;
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify({ seen, runErrors, failures, messages: runner.messages, partials }));
