// Drives the official `@a2a-js/sdk` 1.3 client against the conformance test agent (the
// scripted model, README "The test model's scripts") over A2A, headless.
// Usage: node conformance_a2a.mjs <scenario> <json options: url, key, agent, text, binding?, after?>
// Scenarios:
//   chunks  SendStreamingMessage: every event, with the time it arrived.
//   cancel  SendStreamingMessage, and once the task is WORKING and `after` artifact chunks
//           have arrived, CancelTask while the stream is still read to its end; then GetTask.
// Prints one JSON report.
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const [scenario, raw] = process.argv.slice(2);
const options = JSON.parse(raw);

const fetchImpl = (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set('Authorization', `Bearer ${options.key}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
  preferredTransports: options.binding ? [options.binding] : undefined,
  cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
});
// The trailing slash keeps the agent segment when the resolver resolves the card URL.
const client = await factory.createFromUrl(`${options.url}/v1/a2a/agents/${options.agent}/`);

const stateName = (s) => (typeof s === 'number' ? TaskState[s] : s);
const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const message = {
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: options.text } }],
};

const started = Date.now();
function entry(event) {
  const { $case, value } = event.payload ?? {};
  const out = { kind: $case, at: Date.now() - started };
  if ($case === 'task') {
    out.id = value.id;
    out.state = stateName(value.status?.state);
  } else if ($case === 'statusUpdate') {
    out.state = stateName(value.status?.state);
    out.message = text(value.status?.message?.parts);
  } else if ($case === 'artifactUpdate') {
    out.text = text(value.artifact?.parts);
    out.parts = (value.artifact?.parts ?? []).length;
    out.append = value.append ?? false;
    out.lastChunk = value.lastChunk ?? false;
  }
  return out;
}

const report = { scenario, events: [] };
if (scenario === 'chunks') {
  for await (const event of client.sendMessageStream({ message })) report.events.push(entry(event));
} else if (scenario === 'cancel') {
  let taskId;
  let working = false;
  let chunks = 0;
  let canceling;
  for await (const event of client.sendMessageStream({ message })) {
    const e = entry(event);
    report.events.push(e);
    if (e.kind === 'task') taskId = e.id;
    if (e.kind === 'statusUpdate' && e.state === 'TASK_STATE_WORKING') working = true;
    if (e.kind === 'artifactUpdate') chunks += 1;
    if (!canceling && working && chunks >= (options.after ?? 2)) {
      report.canceledAt = Date.now() - started;
      report.chunksBeforeCancel = chunks;
      // The stream goes on being read while the cancel is under way.
      canceling = client.cancelTask({ id: taskId }).then((task) => {
        report.canceledAnswer = { state: stateName(task.status?.state), at: Date.now() - started };
      });
    }
  }
  if (!canceling) throw new Error(`the stream ended before the cancel: ${JSON.stringify(report.events)}`);
  await canceling;
  report.id = taskId;
  const task = await client.getTask({ id: taskId });
  report.state = stateName(task.status?.state);
  report.answer = (task.artifacts ?? []).map((a) => text(a.parts)).join('');
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify(report));
