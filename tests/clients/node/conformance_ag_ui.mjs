// Drives the official AG-UI HttpAgent (@ag-ui/client) headless against the conformance
// test agent (the scripted model's `!` scripts, worker/src/providers/script.rs).
//   node conformance_ag_ui.mjs <scenario> <json options>
// Scenarios:
//   run     one run of `text`
//   cancel  one run of `text`, aborted by the client once `after` TEXT_MESSAGE_CONTENT
//           events arrived (the client then lingers `linger` ms, still subscribed)
//   answer  one run of `text` that ends with a frontend tool call of `tool`, then a
//           second run whose last message is the `tool` message answering it with `output`
// Prints one JSON report: per run, every event as received (with `receivedAt`, ms since
// the script started), the pending tool calls RUN_FINISHED named, run errors and failures;
// and the client's final message list.
import { HttpAgent } from '@ag-ui/client';

const [scenario, raw] = process.argv.slice(2);
const options = JSON.parse(raw);
const started = Date.now();
const runs = [];

const runner = new HttpAgent({
  url: `${options.url}/v1/ag-ui`,
  headers: { authorization: `Bearer ${options.key}` },
  threadId: options.thread,
  initialMessages: [{ id: 'u1', role: 'user', content: options.text }],
});
const forwardedProps = { agent: options.agent };

async function run(runId, extra = {}, hooks = {}) {
  const record = { runId, events: [], pending: null, runErrors: [], failures: [] };
  runs.push(record);
  const subscriber = {
    onEvent: ({ event }) => { record.events.push({ ...event, receivedAt: Date.now() - started }); },
    onRunFinishedEvent: (params) => { record.pending = params.pendingToolCallIds ?? null; },
    onRunErrorEvent: ({ event }) => { record.runErrors.push({ message: event.message, code: event.code ?? null }); },
    onRunFailed: ({ error }) => { record.failures.push(String(error?.message ?? error)); },
    ...hooks,
  };
  await runner.runAgent({ runId, forwardedProps, ...extra }, subscriber).catch((e) => record.failures.push(String(e?.message ?? e)));
  return record;
}

if (scenario === 'run') {
  await run('run-1');
} else if (scenario === 'cancel') {
  let contents = 0;
  let aborted = null;
  const record = await run('run-1', {}, {
    onTextMessageContentEvent: () => {
      contents += 1;
      if (contents === options.after && aborted === null) {
        aborted = Date.now() - started;
        runner.abortRun();
      }
    },
  });
  record.abortedAt = aborted;
  await new Promise((resolve) => setTimeout(resolve, options.linger ?? 0));
} else if (scenario === 'answer') {
  const tools = [{ name: options.tool, description: options.description, parameters: options.parameters }];
  const first = await run('run-1', { tools });
  const call = runner.messages.flatMap((m) => m.toolCalls ?? []).at(-1);
  if (!call) throw new Error(`no tool call: ${JSON.stringify({ messages: runner.messages, first })}`);
  runner.addMessage({ id: 'tool-1', role: 'tool', toolCallId: call.id, content: options.output });
  await run('run-2', { tools });
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify({ runs, messages: runner.messages }));
