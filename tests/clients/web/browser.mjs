// Drives the built page in headless Chromium (playwright-core with the system browser):
// type a message, see the streamed answer, reload, see the history restored.
//   node browser.mjs <page url> <chromium path> <screenshot dir> <message> <expected answer>
//
// Chromium here runs as root on a closed network: the flags turn off what it would
// otherwise try to reach (component updates, sync, background networking) and keep its
// shared memory in /tmp. A browser that dies before the message is sent is started once
// more, with what it died of in the report; after the message is sent nothing is
// retried, since a second send would change the thread the test checks.
import { chromium } from 'playwright-core';

const [url, executablePath, shots, message, answer] = process.argv.slice(2);
const args = [
  '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const report = {};

class BrowserDied extends Error {}

async function attempt(sendMessage) {
  const browser = await chromium.launch({ executablePath, args });
  let died = null;
  browser.on('disconnected', () => { died ??= 'the browser process exited'; });
  try {
    const page = await browser.newPage();
    page.on('crash', () => { died ??= 'the page crashed'; });
    page.on('console', (m) => { if (m.type() === 'error') (report.console ??= []).push(m.text()); });
    try {
      await page.goto(url);
      await page.waitForSelector('main[data-restored="true"]');
    } catch (error) {
      // The crash and disconnect events may trail the failed call a little.
      await new Promise((resolve) => setTimeout(resolve, 500));
      if (!died && /has been closed|crash/i.test(error.message)) died = 'the browser closed the page';
      if (died) throw new BrowserDied(`${died}: ${error.message}`);
      throw error;
    }
    await sendMessage(page);
  } finally {
    await browser.close().catch(() => {});
  }
}

async function scenario(page) {
  await page.fill('input[aria-label="message"]', message);
  await page.click('button[type="submit"]');
  await page.waitForSelector(`li[data-role="assistant"]:has-text("${answer}")`, { timeout: 30000 });
  await page.waitForSelector('main[data-status="ready"]');
  await page.screenshot({ path: `${shots}/answered.png`, fullPage: true });
  report.before = await page.$$eval('li', (items) => items.map((li) => [li.dataset.role, li.textContent]));
  await page.reload();
  await page.waitForSelector('main[data-restored="true"]');
  await page.waitForSelector(`li[data-role="assistant"]:has-text("${answer}")`, { timeout: 10000 });
  await page.screenshot({ path: `${shots}/restored.png`, fullPage: true });
  report.after = await page.$$eval('li', (items) => items.map((li) => [li.dataset.role, li.textContent]));
}

try {
  await attempt(scenario);
} catch (error) {
  if (!(error instanceof BrowserDied)) throw error;
  report.restarted = error.message;
  console.error(`chromium died before the message was sent, starting it once more: ${error.message}`);
  await attempt(scenario);
}
console.log(JSON.stringify(report));
