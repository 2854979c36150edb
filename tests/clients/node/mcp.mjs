// Drives the official MCP TypeScript SDK (@modelcontextprotocol/sdk Client +
// StreamableHTTPClientTransport, 2025-11-25 handshake) against agentd's MCP endpoint,
// headless. Usage:
//   node mcp.mjs <json options>   options: url, key, tool, prompt, failing_prompt
// Connects, lists the tools, calls `tool` with an onprogress callback, calls it again
// with a prompt the agent fails on, calls an unknown tool, then ends the session with
// DELETE and checks the old session id is refused. Prints one JSON report on stdout.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const options = JSON.parse(process.argv[2]);
const url = new URL(`${options.url}/v1/mcp`);
const headers = { authorization: `Bearer ${options.key}` };
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
const client = new Client({ name: 'agentd-js-test', version: '1.0.0' });
await client.connect(transport);

const report = {
  protocolVersion: transport.protocolVersion,
  serverVersion: client.getServerVersion(),
  sessionId: transport.sessionId,
};
await client.ping();

const listed = await client.listTools();
report.tools = listed.tools.map((t) => ({ name: t.name, title: t.title, description: t.description, inputSchema: t.inputSchema, hasOutputSchema: 'outputSchema' in t }));

const progress = [];
const reply = await client.callTool(
  { name: options.tool, arguments: { prompt: options.prompt } },
  undefined,
  { onprogress: (p) => progress.push(p), timeout: 60000 },
);
report.reply = { isError: reply.isError ?? false, text: reply.content.map((c) => c.text).join(''), meta: reply._meta };
report.progress = progress;

const failed = await client.callTool({ name: options.tool, arguments: { prompt: options.failing_prompt } }, undefined, { timeout: 60000 });
report.failed = { isError: failed.isError ?? false, text: failed.content.map((c) => c.text).join('') };

try {
  await client.callTool({ name: 'no_such_agent_tool', arguments: { prompt: 'x' } });
  report.unknown = { code: null };
} catch (error) {
  report.unknown = { code: error.code, message: String(error.message) };
}

const sessionId = transport.sessionId;
await transport.terminateSession();
report.terminatedSessionId = transport.sessionId ?? null;
await client.close();

// The ended session is gone: the same id is refused.
const after = await fetch(url, {
  method: 'POST',
  headers: {
    ...headers,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': sessionId,
    'mcp-protocol-version': report.protocolVersion,
  },
  body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
});
report.afterDelete = after.status;
console.log(JSON.stringify(report));
