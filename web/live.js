// live.js — the page's live routing/state view (the desktop app's panels,
// drawn on plain canvases): for every MoE layer a strip of its experts'
// load over the routing window, coloured against the Quantile Balancing
// band, and a sparkline of every KDA layer's state norm. It draws the
// snapshots engine.generate passes to onLive (engine.LiveSnapshot).

const BG = '#10131a';

// loadColor is an expert's cell colour: grey-green inside the band
// [lo, hi], amber to red above it (overloaded), blue below (starved).
function loadColor(x, target, lo, hi) {
  if (x > hi) {
    const t = Math.min(1, (x - hi) / Math.max(target, 1e-9));
    return `rgb(${Math.round(230 + 25 * t)},${Math.round(170 - 120 * t)},${Math.round(60 - 40 * t)})`;
  }
  if (x < lo) {
    const t = lo > 0 ? Math.min(1, (lo - x) / lo) : 1;
    return `rgb(${Math.round(70 - 40 * t)},${Math.round(120 - 40 * t)},${Math.round(200 + 30 * t)})`;
  }
  const t = hi > lo ? (x - lo) / (hi - lo) : 0.5;
  return `rgb(${Math.round(80 + 40 * t)},${Math.round(150 + 40 * t)},${Math.round(110 + 20 * t)})`;
}

// drawHeat draws one row per MoE layer, one cell per expert; a cell is the
// fraction of the window's tokens that chose the expert.
export function drawHeat(canvas, s) {
  const ctx = canvas.getContext('2d');
  const n = s && s.hasMoE ? s.rows.length : 0;
  // 14 px rows, the strip at most 300 px high (thinner rows for deep models)
  const rowH = n ? Math.max(2, Math.min(14, Math.floor(296 / n))) : 14;
  const want = n ? 4 + n * rowH : 40;
  if (canvas.height !== want) canvas.height = want;
  const W = canvas.width;
  const H = canvas.height;
  ctx.fillStyle = BG;
  ctx.fillRect(0, 0, W, H);
  if (!n) return 0;
  const left = 34;
  const cellW = (W - left - 2) / s.experts;
  ctx.font = '10px ui-monospace, monospace';
  ctx.textBaseline = 'middle';
  for (let r = 0; r < s.rows.length; r++) {
    const y = 2 + r * rowH;
    if (rowH >= 9) {
      ctx.fillStyle = '#98a0b3';
      ctx.fillText('L' + s.rows[r], 2, y + rowH / 2);
    }
    for (let e = 0; e < s.experts; e++) {
      ctx.fillStyle = loadColor(s.load[r * s.experts + e], s.target, s.bandLo, s.bandHi);
      ctx.fillRect(left + e * cellW, y, Math.max(1, cellW - (cellW > 4 ? 1 : 0)), rowH - 1);
    }
  }
  return s.rows.length;
}

// drawNorms draws each KDA layer's state-norm history as a line, all on
// one scale (the smallest to the largest norm shown, labelled).
export function drawNorms(canvas, s) {
  const ctx = canvas.getContext('2d');
  const W = canvas.width;
  const H = canvas.height;
  ctx.fillStyle = BG;
  ctx.fillRect(0, 0, W, H);
  if (!s || !s.norms) return 0;
  const lines = s.norms.map((h, i) => ({ layer: i, h })).filter((l) => l.h && l.h.length > 0);
  if (!lines.length) return 0;
  const hi = Math.max(...lines.map((l) => Math.max(...l.h)));
  const lo = Math.min(...lines.map((l) => Math.min(...l.h)));
  const span = hi - lo || 1;
  const n = Math.max(...lines.map((l) => l.h.length));
  const yOf = (v) => H - 3 - ((v - lo) / span) * (H - 18); // the top 15 px hold the labels
  lines.forEach((l, k) => {
    ctx.strokeStyle = `hsl(${(k * 137) % 360} 70% 62%)`;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    l.h.forEach((v, i) => {
      const x = 2 + (n > 1 ? (i + n - l.h.length) / (n - 1) : 1) * (W - 4);
      const y = yOf(v);
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    });
    if (l.h.length === 1) ctx.lineTo(W - 2, yOf(l.h[0]));
    ctx.stroke();
  });
  ctx.fillStyle = '#98a0b3';
  ctx.font = '10px ui-monospace, monospace';
  ctx.textBaseline = 'top';
  ctx.fillText(`KDA state norms ‖S‖, ${lines.length} layers`, 4, 2);
  ctx.textAlign = 'right';
  ctx.fillText(`${lo.toPrecision(3)} – ${hi.toPrecision(3)}`, W - 4, 2);
  ctx.textAlign = 'left';
  return lines.length;
}

// describe is the view's one-line summary.
export function describe(s) {
  if (!s || !s.hasData) return 'no routing yet';
  const pct = (x) => (100 * x).toFixed(1) + '%';
  const worst = s.maxVio.length ? Math.max(...s.maxVio) : 0;
  const last = s.last || {};
  const parts = [
    `${s.tokens} of ${s.window} tokens in the window`,
    `QB target ${pct(s.target)} per expert, band ${pct(s.bandLo)}–${pct(s.bandHi)}`,
    `max violation ${worst.toFixed(2)}`,
  ];
  if (last.backend) parts.push(`${last.backend}, state ${(last.stateBytes / 1024).toFixed(0)} KiB`);
  // expert streaming (when the engine streams experts from storage)
  parts.push(s.expertCache
    ? `expert cache ${pct(s.expertCache.hitRate)} hits, ${(s.expertCache.bytesPerToken / 1024).toFixed(0)} KiB/token`
    : 'experts resident');
  return parts.join(' · ');
}

// drawLive draws snapshot s on the page's live view and returns what it
// drew ({rows, kdaLayers}).
export function drawLive(heat, norms, caption, s) {
  const rows = drawHeat(heat, s);
  const kdaLayers = drawNorms(norms, s);
  caption.textContent = describe(s);
  return { rows, kdaLayers };
}

// inked counts the pixels of canvas that differ from the background (the
// browser test checks the view was drawn).
export function inked(canvas) {
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i] !== 0x10 || d[i + 1] !== 0x13 || d[i + 2] !== 0x1a) n++;
  }
  return n;
}
