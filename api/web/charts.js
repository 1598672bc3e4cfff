// memplan web page: the SVG charts (memory per plan by term, tokens per row, memory against micro-batch).
"use strict";
const TERMS = [["params_bytes", "parameters", "#4e79a7"], ["grads_bytes", "gradients", "#f28e2b"],
  ["optimizer_bytes", "optimizer", "#e15759"], ["activations_bytes", "activations", "#76b7b2"],
  ["temp_bytes", "temporaries", "#59a14f"], ["overhead_bytes", "overhead", "#bab0ac"]];

function axes(svg, w, h, pad, top) {
  svg.append(el("line", {x1: pad, y1: h - pad, x2: w - 10, y2: h - pad, stroke: "#57606a"}));
  svg.append(el("line", {x1: pad, y1: 10, x2: pad, y2: h - pad, stroke: "#57606a"}));
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4, y = h - pad - (h - pad - 10) * i / 4;
    svg.append(el("text", {x: pad - 6, y: y + 4, "text-anchor": "end", "font-size": 11}, gib(v)));
  }
  svg.append(el("text", {x: 12, y: h / 2, "font-size": 11, transform: `rotate(-90 12 ${h / 2})`, "text-anchor": "middle"}, "GiB per GPU"));
}

function hline(svg, y, w, pad, cls, color, label, left = false) {
  svg.append(el("line", {class: cls, x1: pad, x2: w - 10, y1: y, y2: y, stroke: color, "stroke-dasharray": "6 4", "stroke-width": 2}));
  svg.append(el("text", {x: left ? pad + 4 : w - 12, y: left ? y + 13 : y - 4, "text-anchor": left ? "start" : "end",
    "font-size": 11, fill: color}, label));
}

function bars(plans, capacity, usable) {
  const w = 900, h = 320, pad = 56;
  const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "memory per GPU by term for each plan"});
  const top = Math.max(capacity, ...plans.map((p) => p.memory.device_total_bytes)) * 1.05;
  const y = (b) => h - pad - (h - pad - 10) * b / top;
  axes(svg, w, h, pad, top);
  const band = (w - pad - 20) / Math.max(plans.length, 1);
  plans.forEach((p, i) => {
    const g = el("g", {class: "plan-bar"});
    let acc = 0;
    for (const [key, name, color] of TERMS) {
      const v = p.memory[key];
      const r = el("rect", {x: pad + 10 + i * band, width: Math.max(band * 0.7, 2), y: y(acc + v), height: Math.max(y(acc) - y(acc + v), 0), fill: color});
      r.append(el("title", {}, `plan ${i + 1} ${name}: ${gib(v)} GiB`));
      g.append(r);
      acc += v;
    }
    g.append(el("text", {x: pad + 10 + i * band + band * 0.35, y: h - pad + 14, "text-anchor": "middle", "font-size": 11}, `#${i + 1}`));
    svg.append(g);
  });
  hline(svg, y(capacity), w, pad, "capacity-line", "#b3261e", `capacity ${gib(capacity)} GiB`);
  hline(svg, y(usable), w, pad, "margin-line", "#9a6700", `capacity - margin ${gib(usable)} GiB`, true);
  TERMS.forEach(([, name, color], i) => {
    svg.append(el("rect", {x: pad + 10 + i * 120, y: h - 22, width: 12, height: 12, fill: color}));
    svg.append(el("text", {x: pad + 26 + i * 120, y: h - 12, "font-size": 11}, name));
  });
  return svg;
}

// Rows per token-count bin (the API's histogram), with the length the plan is made for as a vertical line.
function histogram(hist, cap) {
  const w = 900, h = 260, pad = 56, n = hist.counts.length;
  const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "rows per token count"});
  const lo = hist.edges[0], hi = hist.edges[n], top = Math.max(...hist.counts) * 1.1;
  const x = (t) => pad + (w - pad - 20) * (t - lo) / Math.max(hi - lo, 1), y = (c) => h - pad - (h - pad - 10) * c / top;
  svg.append(el("line", {x1: pad, y1: h - pad, x2: w - 10, y2: h - pad, stroke: "#57606a"}));
  hist.counts.forEach((c, i) => {
    const r = el("rect", {class: "hist-bar", x: x(hist.edges[i]) + 1, width: Math.max(x(hist.edges[i + 1]) - x(hist.edges[i]) - 2, 1),
      y: y(c), height: h - pad - y(c), fill: "#4e79a7"});
    r.append(el("title", {}, `${hist.edges[i]}-${hist.edges[i + 1] - 1} tokens: ${c} rows`));
    svg.append(r);
  });
  for (const t of [lo, hi]) svg.append(el("text", {x: x(t), y: h - pad + 14, "text-anchor": "middle", "font-size": 11}, String(t)));
  svg.append(el("text", {x: w / 2, y: h - 22, "text-anchor": "middle", "font-size": 11}, "tokens per row (text + image)"));
  const cx = x(Math.min(cap + 0.5, hi));
  svg.append(el("line", {class: "cap-line", x1: cx, x2: cx, y1: 10, y2: h - pad, stroke: "#b3261e", "stroke-dasharray": "6 4", "stroke-width": 2}));
  svg.append(el("text", {x: cx - 4, y: 22, "text-anchor": "end", "font-size": 11, fill: "#b3261e"}, `planned for ${cap} tokens`));
  return svg;
}

// The axis is the capacity's (with the fitting points): a micro-batch far over it would flatten the rest, so it is
// drawn clipped at the top, marked, with its size in its title.
const CURVE_TOP = 1.5;      // the axis ends at this many times the capacity at most

function curve(points, capacity, usable) {
  const w = 900, h = 300, pad = 56;
  const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "predicted memory against micro-batch"});
  if (!points.length) return svg;
  const top = Math.min(Math.max(capacity, ...points.map((p) => p[1])) * 1.05, capacity * CURVE_TOP);
  const n = points.length, x = (i) => pad + 20 + (w - pad - 50) * (n === 1 ? 0.5 : i / (n - 1));
  const y = (b) => h - pad - (h - pad - 10) * Math.min(b, top) / top;
  axes(svg, w, h, pad, top);
  svg.append(el("polyline", {class: "memory-curve", fill: "none", stroke: "#0550ae", "stroke-width": 2,
    points: points.map((p, i) => `${x(i)},${y(p[1])}`).join(" ")}));
  points.forEach((p, i) => {
    const over = p[1] > usable, clipped = p[1] > top;
    const c = clipped ? el("polygon", {points: `${x(i) - 6},${y(top) + 8} ${x(i)},${y(top) - 2} ${x(i) + 6},${y(top) + 8}`,
      fill: "#b3261e", class: "over clipped"})
      : el("circle", {cx: x(i), cy: y(p[1]), r: 4, fill: over ? "#b3261e" : "#0550ae", class: over ? "over" : "under"});
    c.append(el("title", {}, `micro-batch ${p[0]}: ${gib(p[1])} GiB${clipped ? " (off the chart)" : ""}`));
    svg.append(c);
    svg.append(el("text", {x: x(i), y: h - pad + 14, "text-anchor": "middle", "font-size": 11}, String(p[0])));
  });
  svg.append(el("text", {x: w / 2, y: h - 26, "text-anchor": "middle", "font-size": 11}, "micro-batch per GPU"));
  hline(svg, y(capacity), w, pad, "capacity-line", "#b3261e", `capacity ${gib(capacity)} GiB`);
  hline(svg, y(usable), w, pad, "margin-line", "#9a6700", `capacity - margin ${gib(usable)} GiB`, true);
  return svg;
}
