// A minimal chat page: useChat over agentd's AI SDK adapter. The key, agent and thread
// come from the query string; on load the thread's committed history is restored from
// /v1/ai-sdk/threads/{thread}/messages.
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import { useEffect, useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(window.location.search);
const key = params.get('key');
const agent = params.get('agent');
const thread = params.get('thread');
const headers = { authorization: `Bearer ${key}`, 'x-agentd-agent': agent };

function text(message) {
  return message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
}

function App() {
  const transport = useMemo(() => new DefaultChatTransport({ api: '/v1/ai-sdk/chat', headers }), []);
  const { messages, sendMessage, setMessages, status, error } = useChat({ id: thread, transport });
  const [input, setInput] = useState('');
  const [restored, setRestored] = useState(false);
  useEffect(() => {
    fetch(`/v1/ai-sdk/threads/${encodeURIComponent(thread)}/messages`, { headers })
      .then((r) => (r.ok ? r.json() : { data: [] }))
      .then((page) => { setMessages(page.data); setRestored(true); });
  }, [setMessages]);
  return (
    <main data-status={status} data-restored={restored}>
      <ul>
        {messages.map((m) => (
          <li key={m.id} data-role={m.role}>{text(m)}</li>
        ))}
      </ul>
      {error && <p role="alert">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text: input }); setInput(''); }}>
        <input aria-label="message" value={input} onChange={(e) => setInput(e.target.value)} />
        <button type="submit" disabled={status !== 'ready' || !restored}>Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
