// Drives the built page in headless Chromium (playwright-core with the system browser):
// type a message, see the streamed answer, reload, see the history restored.
//   node browser.mjs <page url> <chromium path> <screenshot dir> <message> <expected answer>
import { chromium } from 'playwright-core';

const [url, executablePath, shots, message, answer] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu'] });
const report = {};
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') (report.console ??= []).push(m.text()); });
  await page.goto(url);
  await page.waitForSelector('main[data-restored="true"]');
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
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
