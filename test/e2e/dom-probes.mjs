// What the end-to-end tests ask of the real webview DOM. test/e2e/run.mjs evaluates these in the benchmark view's
// frame (through playwright) when a test asks (helpers.ts viewSnapshot), and hands the result back as a file: the
// tests run inside the extension host, which cannot reach a webview's DOM itself.
// Each probe runs in the page: plain browser JavaScript, no imports.

/** The benchmark view as a user sees it: what is enabled and why not, what is selected, and whether it fits. */
export function benchmarkView() {
  const text = (el) => (el ? el.textContent.replace(/\s+/g, ' ').trim() : '');
  const app = document.getElementById('app');
  const run = document.getElementById('run');
  const reason = document.getElementById('run-reason');
  const backends = [...document.querySelectorAll('.backends .backend')].map((row) => {
    const box = row.querySelector('input');
    return { id: box.value, label: text(row.querySelector('label')), checked: box.checked, disabled: box.disabled, reason: text(row.querySelector('.reason')) || undefined };
  });
  const history = [...document.querySelectorAll('.history-list li')].map((li) => ({ text: text(li.querySelector('label')), checked: li.querySelector('input').checked }));
  const details = document.querySelector('section.details');
  const results = document.querySelector('section.results');

  // Fit: nothing wider than the view, no cell whose content overflows it, no word broken across two lines (a code
  // token may break only at its <wbr>s, after a dot or an underscore: each piece is its own text node), no option of a
  // list wider than the list.
  const width = document.documentElement.clientWidth;
  const problems = [];
  const where = (el) => `${el.tagName.toLowerCase()}${el.className && typeof el.className === 'string' ? '.' + el.className.split(' ')[0] : ''} "${text(el).slice(0, 40)}"`;
  if (document.documentElement.scrollWidth > width + 1) problems.push(`the view scrolls sideways: ${document.documentElement.scrollWidth} > ${width} px`);
  for (const wrap of document.querySelectorAll('section:not([hidden]) .table-wrap')) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) problems.push(`a table is wider than the view (${wrap.scrollWidth} > ${wrap.clientWidth} px): ${where(wrap.querySelector('tr'))}`);
  }
  const visible = (el) => el.getClientRects().length > 0;
  for (const el of document.querySelectorAll('#app th, #app td, #app caption, #app h2, #app h3, #app label, #app legend, #app button, #app dt, #app dd, #app p, #app li, #app .reason, #app .run-reason')) {
    if (!visible(el)) continue;
    if (!['DD', 'P', 'LI'].includes(el.tagName) && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible') problems.push(`cut: ${where(el)}`);
    const r = el.getBoundingClientRect();
    if (r.right > width + 1 && !el.closest('.table-wrap')) problems.push(`beyond the right edge (${Math.round(r.right)} > ${width}): ${where(el)}`);
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('code, pre')) continue; // paths may break anywhere, a traceback keeps its lines
      const re = /\S{2,}/g;
      for (let m = re.exec(node.data); m; m = re.exec(node.data)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter((q) => q.width > 0).map((q) => Math.round(q.top)));
        if (lines.size > 1) problems.push(`"${m[0]}" broken across lines in ${where(el)}`);
      }
    }
  }
  const measure = document.createElement('canvas').getContext('2d');
  for (const select of document.querySelectorAll('#app select')) {
    if (!visible(select)) continue;
    const style = getComputedStyle(select);
    measure.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    // what the closed list shows of an option: its width less the padding and the arrow (about 20 px)
    const room = select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
    for (const option of select.options) {
      const wide = measure.measureText(option.text).width;
      if (wide > room) problems.push(`cut: option "${option.text.slice(0, 60)}" of select#${select.id} (${Math.round(wide)} > ${Math.round(room)} px)`);
    }
  }
  for (const t of document.querySelectorAll('section:not([hidden]) svg.chart text')) {
    const r = t.getBoundingClientRect();
    if (r.width > 0 && (r.left < -1 || r.right > width + 1)) problems.push(`chart label outside the view: "${text(t)}" (${Math.round(r.left)}..${Math.round(r.right)} of ${width})`);
  }
  const tab = document.querySelector('.tabs [role="tab"][aria-selected="true"]');
  const fields = [...document.querySelectorAll('#benchmark-form .field input')].filter((i) => i.getClientRects().length > 0).map((i) => i.id);
  return {
    width,
    appWidth: app ? app.clientWidth : 0,
    mode: tab ? tab.id.replace(/^tab-/, '') : undefined,
    fields,
    run: run ? { disabled: run.disabled, title: run.title } : undefined,
    runReason: reason && !reason.hidden ? text(reason) : undefined,
    validation: text(document.querySelector('.validation')) || undefined,
    interpreter: text(document.getElementById('interpreter-path')) || undefined,
    chooseInterpreter: !!document.getElementById('choose-interpreter'),
    backends,
    history,
    details: details && !details.hidden ? {
      heading: text(details.querySelector('h2')),
      text: text(details).slice(0, 2000),
      // A loss check: the eval-loss column (arm and value) and the verdict line.
      evalLoss: [...details.querySelectorAll('.results-table tbody tr')].filter((tr) => tr.querySelector('td.eval-loss'))
        .map((tr) => ({ arm: text(tr.querySelector('th')), value: text(tr.querySelector('td.eval-loss')) })),
      verdict: text(details.querySelector('.loss-verdict')) || undefined,
      // An A/B with the torchao peer: the arms' row names (the peer's says compiled or eager) and the verdict against it.
      arms: [...details.querySelectorAll('.results-table tbody tr th')].map(text),
      peerVerdict: text(details.querySelector('.peer-verdict')) || undefined,
    } : undefined,
    lossCheck: (() => {
      const box = document.getElementById('loss-check');
      const help = document.getElementById('loss-check-help');
      const warm = document.getElementById('warm-start');
      const rounded = document.getElementById('rounded-start');
      return box ? {
        checked: box.checked, disabled: box.disabled, visible: box.getClientRects().length > 0, help: help && !help.hidden ? text(help) : undefined,
        warmStart: warm && warm.getClientRects().length > 0 ? { value: warm.value, disabled: warm.disabled } : undefined,
        roundedStart: rounded && rounded.getClientRects().length > 0 ? { checked: rounded.checked, disabled: rounded.disabled } : undefined,
        abReason: text(document.getElementById('ab-reason')) || undefined,
      } : undefined;
    })(),
    results: results && !results.hidden ? { heading: text(results.querySelector('h2')) } : undefined,
    problems: [...new Set(problems)].slice(0, 40),
  };
}

/** Clicks the form's Inference tab, as a user would; true when it was there to click. */
export function clickInferenceTab() {
  const tab = document.getElementById('tab-inference');
  if (tab) tab.click();
  return !!tab;
}

/** Clicks the "Loss check" box next to Measure conversion, as a user would; true when it was there to click. */
export function clickLossCheck() {
  const box = document.getElementById('loss-check');
  if (box) box.click();
  return !!box;
}

/** Clicks the loss check's "Rounded start" box, as a user would; true when it was there to click. */
export function clickRoundedStart() {
  const box = document.getElementById('rounded-start');
  if (box) box.click();
  return !!box;
}

/** Types 100 into the loss check's "Warm start" field, as a user would; true when it was there to type into. */
export function typeWarmStart() {
  const input = document.getElementById('warm-start');
  if (!input) return false;
  input.value = '100';
  input.dispatchEvent(new Event('input', { bubbles: true }));
  return true;
}

/** Types -5 into "Warm start" (Measure conversion is then refused with the reason); true when it was there. Its own
 *  copy of typeWarmStart's lines: playwright evaluates each probe's source alone in the page, without this module. */
export function typeBadWarmStart() {
  const input = document.getElementById('warm-start');
  if (!input) return false;
  input.value = '-5';
  input.dispatchEvent(new Event('input', { bubbles: true }));
  return true;
}

/** Clicks the Training tab. */
export function clickTrainingTab() {
  const tab = document.getElementById('tab-train');
  if (tab) tab.click();
  return !!tab;
}

export const PROBES = { benchmarkView, clickInferenceTab, clickTrainingTab, clickLossCheck, typeWarmStart, typeBadWarmStart, clickRoundedStart };
