import { defineConfig } from 'vite';

// The page talks to agentd through this server's proxy (same origin, no CORS needed).
const target = process.env.AGENTD_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  esbuild: { jsx: 'automatic' },
  preview: { host: '127.0.0.1', proxy: { '/v1': { target, changeOrigin: true } } },
  server: { host: '127.0.0.1', proxy: { '/v1': { target, changeOrigin: true } } },
});
