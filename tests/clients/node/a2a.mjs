// Drives the official `@a2a-js/sdk` 1.3 client against agentd's A2A server, headless.
// Usage: node a2a.mjs <scenario> <json options: url, key, agent, text, binding?, base?>
// Scenarios: send (SendMessage), stream (SendStreamingMessage), discover (the card
// resolved with no credential, then the extended card and SendMessage with the key).
// `base` replaces the agent's endpoint `<url>/v1/a2a/agents/<agent>` (a public card's
// `/v1/workspaces/<workspace>/a2a/agents/<agent>`). Prints one JSON report.
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const [scenario, raw] = process.argv.slice(2);
const options = JSON.parse(raw);

// The API key rides on every request the SDK makes (card, calls, streams), but for the
// card of `discover`.
const fetchImpl = (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set('Authorization', `Bearer ${options.key}`);
  return fetch(input, { ...init, headers });
};

// `discover`: the card is resolved without a credential (the public card), every call
// after it carries the key.
const cardFetch = scenario === 'discover' ? (input, init) => fetch(input, init) : fetchImpl;
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
  preferredTransports: options.binding ? [options.binding] : undefined,
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: cardFetch }),
});
const base = options.base ?? `${options.url}/v1/a2a/agents/${options.agent}`;
// The resolver resolves `.well-known/agent-card.json` against the base like a URL:
// the trailing slash keeps the agent segment.
const client = await factory.createFromUrl(`${base}/`);
const cardReport = (card) => ({
  name: card.name,
  description: card.description,
  skills: (card.skills ?? []).map((s) => ({ id: s.id, tags: s.tags ?? [] })),
  interfaces: (card.supportedInterfaces ?? []).map((i) => i.url),
  extendedAgentCard: card.capabilities?.extendedAgentCard ?? false,
});

const message = {
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: options.text } }],
};
const stateName = (s) => (typeof s === 'number' ? TaskState[s] : s);
const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

const report = { scenario };
if (scenario === 'discover') {
  // The card the client was built from, resolved the same way: the public one.
  report.public = cardReport(await new DefaultAgentCardResolver({ fetchImpl: cardFetch }).resolve(`${base}/`));
  // `getAgentCard` fetches the extended card (the card says it has one), with the key.
  report.extended = cardReport(await client.getAgentCard());
  const result = await client.sendMessage({ message });
  report.state = stateName(result.status?.state);
  report.answer = (result.artifacts ?? []).map((a) => text(a.parts)).join('');
} else if (scenario === 'send') {
  const result = await client.sendMessage({ message });
  report.id = result.id;
  report.contextId = result.contextId;
  report.state = stateName(result.status?.state);
  report.answer = (result.artifacts ?? []).map((a) => text(a.parts)).join('');
} else if (scenario === 'stream') {
  report.events = [];
  for await (const event of client.sendMessageStream({ message })) {
    const { $case, value } = event.payload ?? {};
    const entry = { kind: $case };
    if ($case === 'task') entry.state = stateName(value.status?.state);
    if ($case === 'statusUpdate') entry.state = stateName(value.status?.state);
    if ($case === 'artifactUpdate') entry.text = text(value.artifact?.parts);
    report.events.push(entry);
  }
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify(report));
