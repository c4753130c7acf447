// kipcheck report viewer: the interactive timeline and latency views of report/index.html.
// Inlined into the page (no network). Data: the JSON of reports/explore.py view_data, in
// <script id="kipcheck-data">. Each redraw aggregates every operation per pixel at the current
// zoom (one pass over typed arrays), then draws fault windows, recoveries, crashes and the
// anomaly records on top: those are never aggregated away.
// The script sits beside the canvases; it starts once the whole page (the proofs too) is parsed.
function kipcheckViewer() {
  "use strict";
  const loadStart = performance.now();
  const D = JSON.parse(document.getElementById("kipcheck-data").textContent);
  const TYPED = {float32: Float32Array, float64: Float64Array, uint8: Uint8Array, uint16: Uint16Array,
                 uint32: Uint32Array, int32: Int32Array};
  const col = {};
  for (const [name, c] of Object.entries(D.columns)) {
    const bin = atob(c.data), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    col[name] = new TYPED[c.dtype](bytes.buffer);
  }
  const N = D.count, LANES = D.labels.length, FAULT_MARGIN = D.faultMargin;
  const TYPE_RGB = [[42, 157, 63], [214, 39, 40], [240, 160, 48]];  // ok, fail, info
  const sendKind = D.kinds.indexOf("send");
  const marked = new Map();  // row -> mark
  for (const m of D.marks) marked.set(m.row, m);
  let highlight = new Set();  // history indices of the proof being shown
  let last = D.end;  // float32 times may round a little above the float64 end
  for (let i = 0; i < N; i++) if (col.end[i] > last) last = col.end[i];
  const full = [0, Math.max(last, 1e-3)];
  let view = full.slice();

  // ---- layout ----
  const LABEL_W = 190, LANE_H = LANES > 20 ? 16 : 22, TOP = 22;
  const hasRecovery = D.recoveries.length > 0;
  const rows = LANES + (hasRecovery ? 1 : 0);
  const tl = document.getElementById("timeline"), lat = document.getElementById("latency");
  const tip = document.getElementById("tooltip"), status = document.getElementById("view-status");
  function size(canvas, h) {
    const w = Math.max(600, canvas.parentElement.clientWidth - 4);
    canvas.width = w; canvas.height = h; canvas.style.width = w + "px"; canvas.style.height = h + "px";
  }
  const xOf = (t, w) => LABEL_W + (t - view[0]) / (view[1] - view[0]) * (w - LABEL_W);
  const tOf = (x, w) => view[0] + (x - LABEL_W) / (w - LABEL_W) * (view[1] - view[0]);
  const laneY = lane => TOP + (lane + (hasRecovery ? 1 : 0)) * LANE_H;

  function shadeFaults(ctx, h, labels) {
    ctx.save();
    for (const f of D.faults) {
      const a = Math.max(xOf(f.start, ctx.canvas.width), LABEL_W), b = xOf(f.stop, ctx.canvas.width);
      if (b < LABEL_W || a > ctx.canvas.width) continue;
      ctx.fillStyle = "rgba(214,39,40,0.12)"; ctx.fillRect(a, TOP, Math.max(b - a, 1), h - TOP);
      if (labels) { ctx.fillStyle = "#a01010"; ctx.font = "10px sans-serif"; ctx.fillText(f.label, a + 2, TOP - 8); }
    }
    ctx.restore();
  }

  function axis(ctx, h) {
    const w = ctx.canvas.width, span = view[1] - view[0];
    const step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    const nice = [1, 2, 5, 10].map(k => k * step).find(s => span / s <= 10) || step * 10;
    ctx.fillStyle = "#444"; ctx.strokeStyle = "#eee"; ctx.font = "10px sans-serif";
    for (let t = Math.ceil(view[0] / nice) * nice; t <= view[1]; t += nice) {
      const x = xOf(t, w);
      ctx.beginPath(); ctx.moveTo(x, TOP); ctx.lineTo(x, h - 14); ctx.stroke();
      ctx.fillText((nice < 1 ? t.toFixed(Math.ceil(-Math.log10(nice))) : t.toFixed(0)) + " s", x + 2, h - 3);
    }
  }

  // black: the record proves an anomaly; grey: only known deviations the profile accepts
  const markColor = m => m.names.every(n => n.startsWith("known ")) ? "#888" : "#000";
  function cross(ctx, x, y, r, color) {
    ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.beginPath();
    ctx.moveTo(x - r, y - r); ctx.lineTo(x + r, y + r); ctx.moveTo(x + r, y - r); ctx.lineTo(x - r, y + r); ctx.stroke();
    ctx.lineWidth = 1;
  }

  // ---- timeline: per lane, per pixel column, which types ended there ----
  function drawTimeline() {
    const h = TOP + rows * LANE_H + 18;
    size(tl, h);
    const ctx = tl.getContext("2d"), w = tl.width;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
    axis(ctx, h);
    shadeFaults(ctx, h - 14, true);
    const cols = w - LABEL_W, bits = new Uint8Array(LANES * cols);
    const k = cols / (view[1] - view[0]);
    let inView = 0;
    for (let lane = 0; lane < LANES; lane++) {  // each lane is sorted by end: visit only what is in view
      const first = firstEndingAtOrAfter(lane, view[0]);
      for (let i = first; i < D.laneStarts[lane + 1]; i++) {
        const t = col.end[i];
        if (t > view[1]) break;
        const x = Math.min(Math.floor((t - view[0]) * k), cols - 1);
        bits[lane * cols + x] |= 1 << col.type[i];
        inView++;
      }
    }
    const img = ctx.getImageData(LABEL_W, 0, cols, h), px = img.data;
    // a pixel column of a lane holds three stripes, fail / info / ok from the top, each drawn
    // when an operation of that type ended there: a lone failure among thousands still shows
    const band = LANE_H - 6, stripe = Math.max(1, Math.floor(band / 3));
    const stripeOf = [2, 0, 1];  // ok, fail, info -> stripe from the top
    for (let lane = 0; lane < LANES; lane++) {
      const y0 = laneY(lane) + 3;
      for (let x = 0; x < cols; x++) {
        const b = bits[lane * cols + x];
        if (!b) continue;
        for (let type = 0; type < 3; type++) {
          if (!(b & (1 << type))) continue;
          const rgb = TYPE_RGB[type], only = b === (1 << type);
          const top = only ? y0 : y0 + stripeOf[type] * stripe, bottom = only ? y0 + band : top + stripe;
          for (let y = top; y < bottom; y++) {
            const p = (y * cols + x) * 4;
            px[p] = rgb[0]; px[p + 1] = rgb[1]; px[p + 2] = rgb[2]; px[p + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(img, LABEL_W, 0);
    ctx.font = "11px sans-serif"; ctx.fillStyle = "#222";
    D.labels.forEach((label, lane) => ctx.fillText(label, 4, laneY(lane) + LANE_H - 6));
    if (hasRecovery) drawRecoveries(ctx);
    for (const c of D.crashes) {
      if (c.lane === null || c.time < view[0] || c.time > view[1]) continue;
      cross(ctx, xOf(c.time, w), laneY(c.lane) + LANE_H / 2, 5, "#c0168c");
    }
    let marksInView = 0;
    for (const m of D.marks) {
      const t = col.end[m.row];
      if (t < view[0] || t > view[1]) continue;
      marksInView++;
      cross(ctx, xOf(t, w), laneY(col.lane[m.row]) + LANE_H / 2, 4, markColor(m));
    }
    tl.dataset.proofOperationsRinged = ringHighlighted(ctx, row => [xOf(col.end[row], w), laneY(col.lane[row]) + LANE_H / 2]);
    tl.dataset.operationsInView = inView;
    tl.dataset.anomalyRecordsInView = marksInView;
    tl.dataset.faultWindows = D.faults.length;
    status.textContent = `${view[0].toFixed(2)}–${view[1].toFixed(2)} s: ${inView} of ${N} operations in view, ` +
      `${marksInView} of ${D.marks.length} anomaly records. Wheel: zoom · drag: pan · double-click: whole run.`;
  }

  function drawRecoveries(ctx) {
    const w = ctx.canvas.width, y = TOP + 3;
    ctx.font = "11px sans-serif"; ctx.fillStyle = "#222"; ctx.fillText("recovery after heal", 4, y + LANE_H - 9);
    const colors = {recovered: "#2a9d3f", slow: "#d62728", undecided: "#f0a030"};
    for (const e of D.recoveries) {
      const times = ["sends", "isr", "reads"].map(m => e[m]).filter(v => typeof v === "number");
      const never = ["sends", "isr", "reads"].some(m => e[m] === "never");
      const end = e.heal + (never ? (e.window || 0) : Math.max(0, ...times));
      ctx.fillStyle = colors[e.status] || "#888"; ctx.globalAlpha = 0.6;
      const a = xOf(e.heal, w), b = xOf(end, w);
      if (b >= LABEL_W) ctx.fillRect(Math.max(a, LABEL_W), y, Math.max(b - Math.max(a, LABEL_W), 2), LANE_H - 6);
      ctx.globalAlpha = 1;
    }
  }

  function ringHighlighted(ctx, at) {
    let ringed = 0;
    ctx.strokeStyle = "#ff8c00"; ctx.lineWidth = 2;
    for (const m of D.marks) {
      if (!highlight.has(m.index) && !highlight.has(m.invoke)) continue;
      const [x, y] = at(m.row);
      if (x < LABEL_W || x > ctx.canvas.width) continue;
      ctx.beginPath(); ctx.arc(x, y, 8, 0, 2 * Math.PI); ctx.stroke();
      ringed++;
    }
    ctx.lineWidth = 1;
    return ringed;
  }

  // ---- latency: send latency (log scale) per pixel, then throughput per second ----
  const LAT_H = 260, THR_H = 120, LAT_MIN = -1, LAT_MAX = 5;  // log10 ms: 0.1 ms .. 100 s
  const latY = ms => TOP + (1 - (Math.log10(Math.max(ms, 0.1)) - LAT_MIN) / (LAT_MAX - LAT_MIN)) * (LAT_H - TOP - 1);
  function drawLatency() {
    const h = LAT_H + THR_H + 30;
    size(lat, h);
    const ctx = lat.getContext("2d"), w = lat.width, cols = w - LABEL_W;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
    axis(ctx, h);
    shadeFaults(ctx, h - 14, false);
    const img = ctx.getImageData(LABEL_W, 0, cols, LAT_H), px = img.data, k = cols / (view[1] - view[0]);
    for (let i = 0; i < N; i++) {
      if (col.kind[i] !== sendKind) continue;
      const x = Math.floor((col.start[i] - view[0]) * k);
      if (x < 0 || x >= cols) continue;
      // latencies outside 0.1 ms .. 100 s sit on the chart's edge, not off it
      const y = Math.min(Math.max(Math.floor(latY((col.end[i] - col.start[i]) * 1000)), TOP), LAT_H - 1);
      const rgb = TYPE_RGB[col.type[i]], p = (y * cols + x) * 4;
      px[p] = rgb[0]; px[p + 1] = rgb[1]; px[p + 2] = rgb[2]; px[p + 3] = 255;
    }
    ctx.putImageData(img, LABEL_W, 0);
    ctx.fillStyle = "#222"; ctx.font = "11px sans-serif";
    ctx.fillText("send latency (ms, log)", 4, TOP + 10);
    for (let e = LAT_MIN; e <= LAT_MAX; e++) ctx.fillText(String(Math.pow(10, e)), LABEL_W - 40, latY(Math.pow(10, e)) + 4);
    for (const m of D.marks) {
      const t = col.start[m.row];
      if (col.kind[m.row] !== sendKind || t < view[0] || t > view[1]) continue;
      cross(ctx, xOf(t, w), Math.min(Math.max(latY((col.end[m.row] - t) * 1000), TOP), LAT_H - 1), 4, markColor(m));
    }
    ringHighlighted(ctx, row => col.kind[row] === sendKind ? [xOf(col.start[row], w), latY((col.end[row] - col.start[row]) * 1000)]
                                                            : [-1, -1]);
    // throughput
    // scaled to the seconds with sends: the final reads after them (every record again, at
    // several times the workload's rate) would flatten the workload to a line; they run off the top
    const top = LAT_H + 14, sent = D.perSecond.sent, read = D.perSecond.read;
    const lastSend = sent.reduce((last, v, s) => (v > 0 ? s : last), read.length - 1);
    const peak = Math.max(1, ...sent, ...read.slice(0, lastSend + 1));
    const after = Math.max(0, ...read.slice(lastSend + 1));
    ctx.fillText("per second", 4, top + 10);
    ctx.fillText(String(peak), LABEL_W - 40, top + 10);
    if (after > peak) ctx.fillText(`after the last send: up to ${after} read/s (off the scale)`, LABEL_W + 360, top + 10);
    lat.dataset.throughputPeak = String(peak);
    lat.dataset.readAfterSends = String(after);
    [[sent, "#1f77b4", "acknowledged sends/s"], [read, "#9467bd", "records read/s"]].forEach(([series, color, label], j) => {
      ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W, top, cols, THR_H); ctx.clip();
      ctx.strokeStyle = color; ctx.beginPath();
      series.forEach((v, s) => {
        const x = xOf(s + 0.5, w), y = top + THR_H - v / peak * (THR_H - 10);
        if (s === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke(); ctx.restore();
      ctx.fillStyle = color; ctx.fillText(label, LABEL_W + 10 + j * 170, top + 10);
    });
    lat.dataset.sendsDrawn = "yes";
  }

  function draw() {
    const t0 = performance.now();
    drawTimeline(); drawLatency();
    document.body.dataset.drawMs = (performance.now() - t0).toFixed(1);  // read by benchmarks/bench_report.py
  }

  // ---- hover: the operation (and its anomalies), the fault windows at that time ----
  function firstEndingAtOrAfter(lane, t) {  // binary search in the lane's rows
    let lo = D.laneStarts[lane], hi = D.laneStarts[lane + 1];
    while (lo < hi) { const mid = (lo + hi) >> 1; if (col.end[mid] < t) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function nearestInLane(lane, t) {
    const first = D.laneStarts[lane], last = D.laneStarts[lane + 1] - 1, lo = firstEndingAtOrAfter(lane, t);
    let best = -1, gap = Infinity;
    for (const r of [lo - 1, lo]) {
      if (r < first || r > last) continue;
      const g = Math.abs(col.end[r] - t);
      if (g < gap) { gap = g; best = r; }
    }
    return best;
  }
  function describe(row) {
    const m = marked.get(row), ms = ((col.end[row] - col.start[row]) * 1000).toFixed(1);
    return `<b>${D.kinds[col.kind[row]]} ${D.types[col.type[row]]}</b> · process ${D.processes[col.process[row]]}` +
      `<br>history index ${col.index[row]}${m ? " (invoke " + m.invoke + ")" : ""} · ${col.start[row].toFixed(3)}–` +
      `${col.end[row].toFixed(3)} s (${ms} ms)` +
      (m ? `<br><span style="color:#d62728">proof of: ${m.names.join(", ")}</span>` : "");
  }
  function faultsAt(t) {
    return D.faults.filter(f => f.start <= t && t <= f.stop).map(f => `fault <b>${f.label}</b> ${f.start.toFixed(1)}–${f.stop.toFixed(1)} s`);
  }
  function showTip(ev, parts) {
    if (!parts.length) { tip.style.display = "none"; return; }
    tip.innerHTML = parts.join("<br>"); tip.style.display = "block";
    tip.style.left = (ev.pageX + 14) + "px"; tip.style.top = (ev.pageY + 14) + "px";
  }
  tl.addEventListener("mousemove", ev => {
    if (drag) return;
    const r = tl.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    if (x < LABEL_W) { tip.style.display = "none"; return; }
    const t = tOf(x, tl.width), lane = Math.floor((y - TOP) / LANE_H) - (hasRecovery ? 1 : 0);
    const parts = [];
    if (lane >= 0 && lane < LANES) {
      const row = nearestInLane(lane, t);
      if (row >= 0 && Math.abs(xOf(col.end[row], tl.width) - x) <= 6) parts.push(describe(row));
    } else if (lane === -1 && hasRecovery) {
      for (const e of D.recoveries) if (Math.abs(e.heal - t) < (view[1] - view[0]) / 50 || (e.heal <= t && t <= e.heal + (e.window || 0)))
        parts.push(`heal of <b>${e.fault}</b> at ${e.heal.toFixed(1)} s: ${e.status} (sends ${e.sends}, ISR ${e.isr}, reads ${e.reads})`);
    }
    showTip(ev, parts.concat(faultsAt(t), [`${t.toFixed(3)} s`]));
  });
  lat.addEventListener("mousemove", ev => {
    if (drag) return;
    const r = lat.getBoundingClientRect(), x = ev.clientX - r.left;
    if (x < LABEL_W) { tip.style.display = "none"; return; }
    const t = tOf(x, lat.width), s = Math.floor(t), parts = [], y = ev.clientY - r.top;
    if (y < LAT_H) {  // the send nearest the mouse, within 5 pixels (one pass, like a redraw)
      let best = -1, gap = 25;
      const k = (lat.width - LABEL_W) / (view[1] - view[0]);
      for (let i = 0; i < N; i++) {
        if (col.kind[i] !== sendKind || col.start[i] < view[0] || col.start[i] > view[1]) continue;
        const dx = LABEL_W + (col.start[i] - view[0]) * k - x;
        if (dx * dx >= gap) continue;
        const dy = Math.min(Math.max(latY((col.end[i] - col.start[i]) * 1000), TOP), LAT_H - 1) - y;
        if (dx * dx + dy * dy < gap) { gap = dx * dx + dy * dy; best = i; }
      }
      if (best >= 0) parts.push(describe(best));
    }
    if (s >= 0 && s < D.perSecond.sent.length)
      parts.push(`second ${s}: ${D.perSecond.sent[s]} acknowledged sends, ${D.perSecond.read[s]} records read`);
    showTip(ev, parts.concat(faultsAt(t), [`${t.toFixed(3)} s`]));
  });
  for (const c of [tl, lat]) c.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  // ---- zoom and pan, shared by both views ----
  let drag = null;
  function zoomAt(t, factor) {
    const span = Math.min(full[1] - full[0], Math.max((view[1] - view[0]) * factor, 1e-3));
    let a = t - (t - view[0]) * span / (view[1] - view[0]);
    a = Math.min(Math.max(a, full[0]), full[1] - span);
    view = [a, a + span]; draw();
  }
  for (const c of [tl, lat]) {
    c.addEventListener("wheel", ev => {
      ev.preventDefault();
      const r = c.getBoundingClientRect(), x = ev.clientX - r.left;
      if (x >= LABEL_W) zoomAt(tOf(x, c.width), ev.deltaY < 0 ? 0.8 : 1.25);
    }, {passive: false});
    c.addEventListener("mousedown", ev => { drag = {x: ev.clientX, view: view.slice(), w: c.width}; });
    c.addEventListener("dblclick", () => { view = full.slice(); draw(); });
  }
  window.addEventListener("mousemove", ev => {
    if (!drag) return;
    const span = drag.view[1] - drag.view[0], dt = (drag.x - ev.clientX) / (drag.w - LABEL_W) * span;
    const a = Math.min(Math.max(drag.view[0] + dt, full[0]), full[1] - span);
    view = [a, a + span]; draw();
  });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("resize", draw);
  document.getElementById("zoom-in").onclick = () => zoomAt((view[0] + view[1]) / 2, 0.5);
  document.getElementById("zoom-out").onclick = () => zoomAt((view[0] + view[1]) / 2, 2);
  document.getElementById("zoom-reset").onclick = () => { view = full.slice(); highlight = new Set(); draw(); };

  // ---- proofs: zoom to an example's records and ring them ----
  for (const button of document.querySelectorAll("button.show")) {
    button.onclick = () => {
      const indices = JSON.parse(button.dataset.indices);
      highlight = new Set(indices);
      const times = D.marks.filter(m => highlight.has(m.index) || highlight.has(m.invoke))
        .flatMap(m => [col.start[m.row], col.end[m.row]]);
      if (times.length) {
        // the proof, and the fault windows within FAULT_MARGIN s of it (as listed under the proof)
        let a = Math.min(...times), b = Math.max(...times);
        for (const f of D.faults) {
          if (f.stop < a - FAULT_MARGIN || f.start > b + FAULT_MARGIN) continue;
          a = Math.min(a, Math.max(f.start, a - FAULT_MARGIN)); b = Math.max(b, Math.min(f.stop, b + FAULT_MARGIN));
        }
        const pad = Math.max((b - a) * 0.05, 0.5);
        view = [Math.max(full[0], a - pad), Math.min(full[1], b + pad)];
      }
      draw();
      if (!asked) tl.scrollIntoView({behavior: "smooth", block: "start"});
    };
  }
  // ?show=<example id> opens the page with that example's proof shown (used by the screenshots)
  const asked = new URLSearchParams(location.search).get("show");
  const example = asked && document.getElementById(asked);
  if (example) {
    highlight = new Set(JSON.parse(example.dataset.indices));
    const b = example.querySelector("button.show");
    if (b) { b.onclick(); } else draw();
  } else draw();
  // for tests and the console: where an operation (by a history index of it) sits on the page
  function rowOf(historyIndex) {
    const m = D.marks.find(m => m.index === historyIndex || m.invoke === historyIndex);
    let row = m ? m.row : -1;
    for (let i = 0; row < 0 && i < N; i++) if (col.index[i] === historyIndex) row = i;
    return row;
  }
  window.kipcheckViewer = {
    pointOf(historyIndex) {  // on the timeline
      const row = rowOf(historyIndex), r = tl.getBoundingClientRect();
      return row < 0 ? null : [r.left + xOf(col.end[row], tl.width), r.top + laneY(col.lane[row]) + LANE_H / 2];
    },
    latencyPointOf(historyIndex) {  // a send on the latency view
      const row = rowOf(historyIndex), r = lat.getBoundingClientRect();
      if (row < 0 || col.kind[row] !== sendKind) return null;
      const y = Math.min(Math.max(latY((col.end[row] - col.start[row]) * 1000), TOP), LAT_H - 1);
      return [r.left + xOf(col.start[row], lat.width), r.top + y];
    },
  };
  document.body.dataset.viewer = "ready";
  document.body.dataset.loadMs = (performance.now() - loadStart).toFixed(1);  // decode, index, first draw
}
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", kipcheckViewer);
else kipcheckViewer();
