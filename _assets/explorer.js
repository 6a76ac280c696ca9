/* posbias explorer: the born influence row of a layout, computed in the reader's browser.
 *
 * The algorithm is posbias_nb.rollout.log_layout_rollout (Python), ported: the last row of
 * R_T ... R_1 with R_t = (1 - lambda_t) I + lambda_t A_t, where A_t averages row i uniformly
 * (or with ALiBi weights e^{-m(i-j)}) over its keys S_i (full: 1..i; sliding window w: the last
 * w; chunked c: i's chunk up to i) and a sink of logit s takes e^s/(Z_i + e^s) of the row.
 * One O(L) pass a layer:
 *   - a stack of full layers runs in block floating point (a mantissa per position, one log
 *     scale per block of 64): the suffix sums are a first-order recurrence, with no
 *     transcendental function per entry, so L = 100,000 at H = 128 redraws in milliseconds;
 *   - any other layout runs in log space, by block-wise log-sums (the suffix of a window's
 *     block plus the prefix of the next), exactly as the Python code.
 * Neither path ever subtracts two sums, and neither underflows: a value far below 1e-308 keeps
 * its log. The settings live in the URL (?L=1000&H=12&alpha=0.5&layout=full...), so a setting
 * can be linked to. No library, no network: the page runs from file://.
 * Checked against the Python rows by tests/browser/test_explorer.py (relative error <= 1e-10).
 */
(function () {
  "use strict";

  var DEFAULTS = { L: 1000, H: 12, alpha: 0.5, layout: "full", w: 64, k: 5, c: 256, s: null,
                   schedule: "constant", m: 0, x: "linear" };
  var LIMITS = { L: [16, 100000], H: [1, 128], w: [1, 100000], k: [1, 127], c: [1, 100000] };
  var LAYOUTS = ["full", "sliding", "hybrid", "chunked"];
  var NEG = -Infinity;

  function schedules() { return window.POSBIAS_SCHEDULES || {}; }

  // ------------------------------------------------------------------------------------------
  // settings

  function normalize(raw) {
    var s = {}, k;
    for (k in DEFAULTS) s[k] = DEFAULTS[k];
    for (k in raw) if (raw[k] !== undefined && raw[k] !== null && raw[k] !== "") s[k] = raw[k];
    var out = {};
    for (k in LIMITS) {
      var v = Math.round(Number(s[k]));
      if (!isFinite(v)) v = DEFAULTS[k];
      out[k] = Math.min(LIMITS[k][1], Math.max(LIMITS[k][0], v));
    }
    var a = Number(s.alpha);
    out.alpha = isFinite(a) ? Math.min(1, Math.max(0, a)) : DEFAULTS.alpha;
    var m = Number(s.m);
    out.m = isFinite(m) ? Math.min(1, Math.max(0, m)) : 0;
    out.layout = LAYOUTS.indexOf(s.layout) >= 0 ? s.layout : "full";
    var sink = (s.s === null || s.s === "none") ? null : Number(s.s);
    out.s = (sink === null || !isFinite(sink)) ? null : Math.min(20, Math.max(-20, sink));
    var sch = schedules();
    out.schedule = (s.schedule !== "constant" && sch[s.schedule]) ? s.schedule : "constant";
    if (out.schedule !== "constant") out.H = sch[out.schedule].length;
    out.x = s.x === "log" ? "log" : "linear";
    return out;
  }

  // the layers from the input (index 0) to the output, as {kind, size, sink}
  function layers(s) {
    var pattern;
    if (s.layout === "full") pattern = [{ kind: "full", size: 0 }];
    else if (s.layout === "sliding") pattern = [{ kind: "sliding", size: s.w }];
    else if (s.layout === "chunked") pattern = [{ kind: "chunked", size: s.c }];
    else {
      pattern = [];
      for (var i = 0; i < s.k; i++) pattern.push({ kind: "sliding", size: s.w });
      pattern.push({ kind: "full", size: 0 });
    }
    var out = [];
    for (var t = 0; t < s.H; t++) {
      var p = pattern[t % pattern.length];
      out.push({ kind: p.kind, size: p.size, sink: s.s });
    }
    return out;
  }

  function lambdas(s) {
    var lam = new Float64Array(s.H);
    if (s.schedule === "constant") { lam.fill(s.alpha); return lam; }
    var src = schedules()[s.schedule];
    for (var t = 0; t < s.H; t++) lam[t] = src[t];
    return lam;
  }

  // ------------------------------------------------------------------------------------------
  // per-row normalizers: n_i keys, Z_i = sum_{d < n_i} e^{-m d}, log(Z_i + e^s)

  function nKeys(layer, i1) {  // i1: 1-indexed row
    if (layer.kind === "full") return i1;
    if (layer.kind === "sliding") return Math.min(i1, layer.size);
    return i1 - layer.size * Math.floor((i1 - 1) / layer.size);
  }

  function logDen(layer, L, m) {
    var out = new Float64Array(L);
    var lq = m > 0 ? Math.log(-Math.expm1(-m)) : 0;
    for (var i = 0; i < L; i++) {
      var n = nKeys(layer, i + 1);
      var lz = m > 0 ? Math.log(-Math.expm1(-m * n)) - lq : Math.log(n);
      out[i] = layer.sink === null ? lz : lae(lz, layer.sink);
    }
    return out;
  }

  function lae(a, b) {  // log(e^a + e^b)
    if (a === NEG) return b;
    if (b === NEG) return a;
    return a > b ? a + Math.log1p(Math.exp(b - a)) : b + Math.log1p(Math.exp(a - b));
  }

  // ------------------------------------------------------------------------------------------
  // log-space path (any layout): one layer

  // log-sums of exp(u) accumulated inside aligned blocks of b, forward or backward
  function blockCum(u, b, reverse, out) {
    var n = u.length;
    for (var s0 = 0; s0 < n; s0 += b) {
      var e = Math.min(n, s0 + b), acc = NEG, j;
      if (reverse) for (j = e - 1; j >= s0; j--) { acc = lae(acc, u[j]); out[j] = acc; }
      else for (j = s0; j < e; j++) { acc = lae(acc, u[j]); out[j] = acc; }
    }
    return out;
  }

  function logApply(v, layer, m, den, tmp) {
    var L = v.length, j, u = tmp.u, out = tmp.out;
    for (j = 0; j < L; j++) u[j] = v[j] - den[j] - m * j;
    if (layer.kind === "full") {
      var acc = NEG;
      for (j = L - 1; j >= 0; j--) { acc = lae(acc, u[j]); out[j] = acc; }
    } else {
      var b = layer.size;
      blockCum(u, b, true, out);
      if (layer.kind === "sliding") {
        var pre = blockCum(u, b, false, tmp.pre);
        for (j = 0; j < L; j++) {
          if (j % b !== 0 && j + b - 1 < L) out[j] = lae(out[j], pre[j + b - 1]);
          else if (j % b !== 0) {  // the next block is cut by the end: its whole prefix
            var last = L - 1;
            if (Math.floor(last / b) > Math.floor(j / b)) out[j] = lae(out[j], pre[last]);
          }
        }
      }
    }
    if (m > 0) for (j = 0; j < L; j++) out[j] += m * j;
    return out;
  }

  function logRow(s) {
    var L = s.L, lay = layers(s), lam = lambdas(s), m = s.m;
    var v = new Float64Array(L).fill(NEG);
    v[L - 1] = 0;
    var tmp = { u: new Float64Array(L), out: new Float64Array(L), pre: new Float64Array(L) };
    var dens = {};
    for (var t = s.H - 1; t >= 0; t--) {
      var a = lam[t];
      if (a === 0) continue;
      var layer = lay[t], key = layer.kind + ":" + layer.size;
      if (!dens[key]) dens[key] = logDen(layer, L, m);
      var Kv = logApply(v, layer, m, dens[key], tmp);
      var keep = Math.log1p(-a), mix = Math.log(a);
      for (var j = 0; j < L; j++) v[j] = a === 1 ? Kv[j] + mix : lae(v[j] + keep, Kv[j] + mix);
    }
    return v;
  }

  // ------------------------------------------------------------------------------------------
  // block floating point path (every layer full): mant[j] * exp(sc[j >> 6])

  var BS = 64;

  function fullRowBFP(s) {
    var L = s.L, lam = lambdas(s), m = s.m, q = Math.exp(-m);
    var nb = Math.ceil(L / BS), mant = new Float64Array(L), sc = new Float64Array(nb).fill(NEG);
    mant[L - 1] = 1; sc[nb - 1] = 0;
    var den = logDen({ kind: "full", size: 0, sink: s.s }, L, m);
    var rinv = new Float64Array(L);
    for (var i = 0; i < L; i++) rinv[i] = Math.exp(-den[i]);
    for (var t = s.H - 1; t >= 0; t--) {
      var a = lam[t];
      if (a === 0) continue;
      var keep = 1 - a, acc = 0, A = NEG;
      for (var b = nb - 1; b >= 0; b--) {
        var s0 = b * BS, e = Math.min(L, s0 + BS), sb = sc[b];
        if (acc === 0) A = sb;
        else if (sb > A) { acc *= Math.exp(A - sb); A = sb; }
        if (acc > 0 && acc < 1e-250) { A += Math.log(acc); acc = 1; }
        if (A === NEG) { continue; }  // nothing here and nothing carried: all zero
        var f = sb === NEG ? 0 : Math.exp(sb - A);
        var out = sb > A ? sb : A;
        var fk = sb === NEG ? 0 : Math.exp(sb - out) * keep, fa = Math.exp(A - out) * a;
        var mx = 0, j, x, y;
        if (q === 1) {  // no ALiBi: the suffix sum's dependency chain is one addition
          for (j = e - 1; j >= s0; j--) {
            x = mant[j];
            acc += x * rinv[j] * f;
            y = x * fk + acc * fa;
            mant[j] = y;
            if (y > mx) mx = y;
          }
        } else {
          for (j = e - 1; j >= s0; j--) {
            x = mant[j];
            acc = x * rinv[j] * f + q * acc;
            y = x * fk + acc * fa;
            mant[j] = y;
            if (y > mx) mx = y;
          }
        }
        if (mx > 0) {  // renormalize lazily: only a block whose largest mantissa has left
          sc[b] = out;   // [1e-30, 1e30] is rescaled, so most layers need no second pass
          if (mx < 1e-30 || mx > 1e30) {
            var r = 1 / mx;
            for (j = s0; j < e; j++) mant[j] *= r;
            sc[b] = out + Math.log(mx);
          }
        } else sc[b] = NEG;
      }
    }
    var v = new Float64Array(L);
    for (var j2 = 0; j2 < L; j2++) {
      var mm = mant[j2];
      v[j2] = mm > 0 ? Math.log(mm) + sc[j2 >> 6] : NEG;
    }
    return v;
  }

  function computeRow(s) {
    var allFull = s.layout === "full";
    return allFull ? fullRowBFP(s) : logRow(s);
  }

  // ------------------------------------------------------------------------------------------
  // the numbers beside the plot (posbias_nb.rollout.explorer.summary)

  function lse(v, a, b) {
    var mx = NEG, i;
    for (i = a; i < b; i++) if (v[i] > mx) mx = v[i];
    if (mx === NEG) return NEG;
    var acc = 0;
    for (i = a; i < b; i++) acc += Math.exp(v[i] - mx);
    return mx + Math.log(acc);
  }

  // the k-th smallest entry (0-indexed) by quickselect, reordering a: a[0..k-1] <= a[k]
  function select(a, k) {
    var lo = 0, hi = a.length - 1;
    while (hi > lo) {
      var pivot = a[(lo + hi) >> 1], i = lo, j = hi;
      while (i <= j) {
        while (a[i] < pivot) i++;
        while (a[j] > pivot) j--;
        if (i <= j) { var t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
      }
      if (k <= j) hi = j; else if (k >= i) lo = i; else break;
    }
    return a[k];
  }

  function middle(L) {  // metrics.regions(L).middle: the central half [a, L - a)
    var a = Math.floor((L + 2) / 4);
    return [a, L - a];
  }

  function summary(s, row) {
    var L = row.length, tot = lse(row, 0, L), v = new Float64Array(L), i;
    for (i = 0; i < L; i++) v[i] = row[i] - tot;
    var k = Math.max(1, Math.round(0.02 * L));
    var peak = lae(lse(v, 0, k), lse(v, L - k, L)) - Math.log(2 * k);
    // running log-sums over k consecutive entries, block-wise (no differences)
    var suf = blockCum(v, k, true, new Float64Array(L));
    var ext = new Float64Array(L + k).fill(NEG);
    ext.set(v);
    var pre = blockCum(ext, k, false, new Float64Array(L + k));
    var best = Infinity, jb = 0;
    for (var j = 0; j <= L - k; j++) {
      var r = j % k === 0 ? suf[j] : lae(suf[j], pre[j + k - 1]);
      if (r < best) { best = r; jb = j; }
    }
    best -= Math.log(k);
    var md = middle(L), arr = v.slice(md[0], md[1]), n = arr.length;
    var hiMid = select(arr, Math.floor(n / 2)), med;
    if (n % 2) med = hiMid;
    else {  // the other central value: the largest of the lower part
      var loMid = NEG;
      for (i = 0; i < Math.floor(n / 2); i++) if (arr[i] > loMid) loMid = arr[i];
      med = lae(loMid, hiMid) - Math.log(2);
    }
    var lam = lambdas(s), law = 0;
    for (i = 0; i < lam.length; i++) law += Math.log1p(-lam[i]);
    var ln10 = Math.log(10);
    return { spike: v[L - 1], spike_law: law, log10_ptv: (peak - best) / ln10,
             valley: jb + Math.floor((k - 1) / 2) + 1, middle_share: Math.exp(lse(v, md[0], md[1])),
             log10_first_arm: (v[0] - med) / ln10 };
  }

  // the continuum law of the Cesàro chapter (full layers, no sink, no ALiBi, constant alpha):
  // log of rho_H(x) / L, rho_H(x) = sum_k C(H,k) a^k (1-a)^{H-k} (ln 1/x)^{k-1} / (k-1)!
  function lgamma(n) { var r = 0; for (var i = 2; i < n; i++) r += Math.log(i); return r; }
  var LG = [];
  function lfact(n) { while (LG.length <= n) LG.push(lgamma(LG.length + 1)); return LG[n]; }
  function logContinuum(x, H, a, L) {
    if (a === 0) return NEG;
    var t = -Math.log(x), acc = NEG;
    for (var k = 1; k <= H; k++) {
      var lw = lfact(H) - lfact(k) - lfact(H - k) + k * Math.log(a) +
               (H - k) * (a === 1 ? (H === k ? 0 : NEG) : Math.log1p(-a));
      if (a === 1 && k !== H) continue;
      var term = lw + (k - 1) * (t > 0 ? Math.log(t) : (k === 1 ? 0 : NEG)) - lfact(k - 1);
      acc = lae(acc, term);
    }
    return acc - Math.log(L);
  }
  function continuumApplies(s) {
    return s.layout === "full" && s.s === null && s.m === 0 && s.schedule === "constant";
  }

  // ------------------------------------------------------------------------------------------
  // the page

  var api = { normalize: normalize, computeRow: computeRow, logRow: logRow,
              fullRowBFP: fullRowBFP, summary: summary, logContinuum: logContinuum,
              lastRow: null, lastSummary: null, lastMs: null, settings: null };
  window.posbiasExplorer = api;

  function readURL() {
    var q = new URLSearchParams(window.location.search), raw = {};
    q.forEach(function (v, k) { raw[k] = v; });
    return normalize(raw);
  }

  function writeURL(s) {
    var q = [];
    for (var k in DEFAULTS) {
      if (s[k] === DEFAULTS[k] || s[k] === null) continue;
      q.push(k + "=" + encodeURIComponent(s[k]));
    }
    var url = window.location.pathname + (q.length ? "?" + q.join("&") : "");
    try { window.history.replaceState(null, "", url); } catch (e) { /* file:// in some browsers */ }
    var link = document.getElementById("pbx-link");
    if (link) link.textContent = q.length ? "?" + q.join("&") : "(the defaults)";
  }

  var SLOW_MS = 250;  // a redraw past this is called slow on the page
  function fmt(x, d) {
    if (x === null || !isFinite(x)) return "not defined";
    return Number(x).toPrecision(d || 4);
  }
  var SUP = { "0": "\u2070", "1": "\u00b9", "2": "\u00b2", "3": "\u00b3", "4": "\u2074",
              "5": "\u2075", "6": "\u2076", "7": "\u2077", "8": "\u2078", "9": "\u2079",
              "-": "\u207b" };
  function sci(l10) {  // a number given by its base-10 log: "58.6", or "5.93 × 10³" from 1000 on
    if (l10 === null || !isFinite(l10)) return "not defined";
    if (l10 > -3 && l10 < 3) {
      var plain = Number(Math.pow(10, l10)).toPrecision(3);
      if (plain.indexOf("e") < 0) return plain;  // 999.7 rounds to "1.00e+3": written below
    }
    var e = Math.floor(l10), mnt = Math.pow(10, l10 - e);
    if (mnt >= 9.995) { mnt /= 10; e += 1; }
    return mnt.toFixed(2) + " \u00d7 " + pow10(e);
  }
  function pow10(e) {  // "10⁻⁵"
    return "10" + String(e).split("").map(function (c) { return SUP[c]; }).join("");
  }
  function fmtLog10(lx) {  // a number given by its natural log, as a power of ten
    if (!isFinite(lx)) return lx === NEG ? "0" : "not defined";
    return sci(lx / Math.log(10));
  }

  function draw(canvas, s, row) {
    var ctx = canvas.getContext("2d"), W = canvas.width, Hh = canvas.height;
    var pad = { l: 84, r: 12, t: 12, b: 40 }, pw = W - pad.l - pad.r, ph = Hh - pad.t - pad.b;
    var L = row.length, ln10 = Math.log(10), i;
    var cols = Math.max(1, Math.floor(pw)), lo = new Float64Array(cols).fill(Infinity),
        hi = new Float64Array(cols).fill(-Infinity), has = new Uint8Array(cols);
    var logx = s.x === "log";
    function col(j) {  // 0-indexed position -> pixel column
      var f = logx ? Math.log(j + 1) / Math.log(L) : j / Math.max(1, L - 1);
      return Math.min(cols - 1, Math.floor(f * (cols - 1) + 0.5));
    }
    var ymax = -Infinity, ymin = Infinity;
    for (i = 0; i < L; i++) {
      var y = row[i], c = col(i);
      has[c] = 1;  // a column with positions (on a log axis the first ones are far apart)
      if (y === NEG) continue;
      if (y < lo[c]) lo[c] = y;
      if (y > hi[c]) hi[c] = y;
      if (y > ymax) ymax = y;
      if (y < ymin) ymin = y;
    }
    var top = Math.ceil(ymax / ln10 + 0.1), bot = Math.floor(ymin / ln10 - 0.1);
    if (top - bot > 60) bot = top - 60;  // at most 60 decades are drawn
    if (top - bot < 1) bot = top - 1;
    function py(lv) { return pad.t + ph * (top - lv / ln10) / (top - bot); }
    ctx.clearRect(0, 0, W, Hh);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, Hh);
    ctx.strokeStyle = "#999"; ctx.lineWidth = 1; ctx.font = "12px sans-serif"; ctx.fillStyle = "#333";
    ctx.strokeRect(pad.l, pad.t, pw, ph);
    var step = Math.max(1, Math.ceil((top - bot) / 8));
    for (var d = bot; d <= top; d += step) {
      var yy = py(d * ln10);
      ctx.fillText(pow10(d), 26, yy + 4);
      ctx.beginPath(); ctx.moveTo(pad.l - 4, yy); ctx.lineTo(pad.l, yy); ctx.stroke();
    }
    var ticks = logx ? [] : [0, 0.25, 0.5, 0.75, 1];
    if (logx) for (var p = 1; p <= L; p *= 10) ticks.push(p);
    ticks.forEach(function (tk) {
      var j = logx ? tk - 1 : Math.round(tk * (L - 1));
      var xx = pad.l + col(j);
      ctx.beginPath(); ctx.moveTo(xx, pad.t + ph); ctx.lineTo(xx, pad.t + ph + 4); ctx.stroke();
      var lab = String(j + 1), tw = ctx.measureText(lab).width;
      ctx.fillText(lab, Math.max(0, Math.min(xx - tw / 2, W - tw - 2)), pad.t + ph + 18);
    });
    ctx.fillText(logx ? "position j (log scale)" : "position j", pad.l + pw / 2 - 40, Hh - 6);
    ctx.save(); ctx.translate(14, pad.t + ph / 2); ctx.rotate(-Math.PI / 2);
    var ylab = "influence on the last output (log scale)";
    ctx.fillText(ylab, -ctx.measureText(ylab).width / 2, 0);
    ctx.restore();
    ctx.strokeStyle = "#1f77b4"; ctx.lineWidth = 1.5; ctx.beginPath();
    var started = false;
    for (var cc = 0; cc < cols; cc++) {
      if (hi[cc] === -Infinity) {  // no position here: bridge it; only zeros: break the line
        if (has[cc]) started = false;
        continue;
      }
      var x0 = pad.l + cc, y0 = py(Math.max(lo[cc], bot * ln10)), y1 = py(hi[cc]);
      if (!started) { ctx.moveTo(x0, y1); started = true; } else ctx.lineTo(x0, y1);
      if (y0 - y1 > 1) { ctx.lineTo(x0, y0); ctx.moveTo(x0, y1); }
    }
    ctx.stroke();
    if (continuumApplies(s) && s.alpha > 0) {
      ctx.strokeStyle = "#d62728"; ctx.setLineDash([5, 4]); ctx.beginPath();
      var st = false;
      for (var c2 = 0; c2 < cols; c2++) {
        var f2 = c2 / (cols - 1), jj = logx ? Math.exp(f2 * Math.log(L)) : 1 + f2 * (L - 1);
        var xx2 = Math.min(1, jj / L), lv = logContinuum(xx2, s.H, s.alpha, L);
        if (!isFinite(lv) || lv / ln10 < bot) { st = false; continue; }
        var Y = py(lv);
        if (!st) { ctx.moveTo(pad.l + c2, Y); st = true; } else ctx.lineTo(pad.l + c2, Y);
      }
      ctx.stroke(); ctx.setLineDash([]);
    }
  }

  function render() {
    var s = readControls();
    writeURL(s);
    var t0 = performance.now();
    var row = computeRow(s);
    var sm = summary(s, row);
    var t1 = performance.now();
    api.lastRow = row; api.lastSummary = sm; api.lastMs = t1 - t0; api.settings = s;
    var canvas = document.getElementById("pbx-canvas");
    if (canvas) draw(canvas, s, row);
    api.lastDrawMs = performance.now() - t0;
    var text = "Last row of " + s.H + " layers (" + s.layout + (s.s !== null ? ", sink " + s.s : "") +
      (s.m > 0 ? ", ALiBi slope " + s.m : "") + ", " + (s.schedule === "constant" ?
      "alpha " + s.alpha : "the published lambda schedule of " + s.schedule) + ") at L = " + s.L +
      ": last token " + fmtLog10(sm.spike + 0) + " of the total (recency mass prod(1 - lambda) = " +
      fmtLog10(sm.spike_law) + "); robust peak-to-valley " + sci(sm.log10_ptv) +
      " with the valley at position " + sm.valley + " of " + s.L + "; the middle half holds " +
      fmt(sm.middle_share, 4) + " of the influence; the first token is " +
      sci(sm.log10_first_arm) + " times the median of the middle." +
      (continuumApplies(s) ? " Dashed: the continuum law rho_H(j/L)/L." : "") +
      " Computed in " + api.lastMs.toFixed(1) + " ms" + (api.lastMs > SLOW_MS ?
      " (a slow setting: sliding, chunked and sink layers take the log-space path, a few " +
      "logarithms per position and layer; a shorter L or fewer layers redraw faster)." : ".");
    var out = document.getElementById("pbx-summary");
    if (out) out.textContent = text;
    if (canvas) canvas.setAttribute("aria-label", text);
  }

  var CONTROLS = ["L", "H", "alpha", "layout", "w", "k", "c", "s", "schedule", "m", "x"];

  var exactL = null;  // the context length as set (URL or number box), not as the slider snaps it

  function readControls() {
    var raw = {};
    CONTROLS.forEach(function (k) {
      var el = document.getElementById("pbx-" + k);
      if (!el) return;
      var v = el.value;
      if (k === "L") v = exactL !== null ? exactL : Math.round(Math.pow(10, Number(v)));
      if (k === "s" && (v === "" || v === "none")) v = null;
      raw[k] = v;
    });
    var s = normalize(raw);
    CONTROLS.forEach(function (k) {  // the visible values
      var o = document.getElementById("pbx-" + k + "-value");
      if (o) o.textContent = s[k] === null ? "none" : String(s[k]);
    });
    var num = document.getElementById("pbx-Lnum");
    if (num && document.activeElement !== num) num.value = String(s.L);
    var hEl = document.getElementById("pbx-H");
    if (hEl) hEl.disabled = s.schedule !== "constant";
    return s;
  }

  function setControls(s) {
    CONTROLS.forEach(function (k) {
      var el = document.getElementById("pbx-" + k);
      if (!el) return;
      if (k === "L") { el.value = String(Math.log10(s.L)); exactL = s.L; }
      else if (k === "s") el.value = s.s === null ? "" : String(s.s);
      else el.value = String(s[k]);
    });
  }

  function init() {
    var root = document.getElementById("posbias-explorer");
    if (!root) return;
    var sel = document.getElementById("pbx-schedule");
    if (sel) Object.keys(schedules()).forEach(function (name) {
      var o = document.createElement("option"); o.value = name;
      o.textContent = name + " (published lambda_t, " + schedules()[name].length + " layers)";
      sel.appendChild(o);
    });
    var s = readURL();
    setControls(s);
    root.hidden = false;
    var stat = document.getElementById("fig-explore-static");
    if (stat) stat.hidden = true;
    CONTROLS.forEach(function (k) {
      var el = document.getElementById("pbx-" + k);
      if (!el) return;
      var h = k === "L" ? function () { exactL = null; render(); } : render;
      el.addEventListener("input", h);
      el.addEventListener("change", h);
    });
    var num = document.getElementById("pbx-Lnum");
    if (num) {
      num.value = String(s.L);
      num.addEventListener("change", function () {
        var v = Math.round(Number(num.value));
        if (isFinite(v)) { exactL = Math.min(100000, Math.max(16, v));
          document.getElementById("pbx-L").value = String(Math.log10(exactL)); render(); }
      });
    }
    render();
  }

  api.render = render;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
