// A small line chart as inline SVG: one polyline per series over the samples kept so far.

const NS = "http://www.w3.org/2000/svg";
const W = 320;
const H = 100;

function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  return el;
}

// samples: [{t, values: {name: number}}]; series: [{key, label, color}].
export function lineChart(title, samples, series, unit) {
  const figure = document.createElement("figure");
  figure.className = "chart";
  const max = Math.max(1e-9, ...samples.flatMap((s) => series.map((d) => s.values[d.key] || 0)));
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", preserveAspectRatio: "none" });
  const label = svg("title", {});
  label.textContent = `${title}, the last ${samples.length} samples`;
  chart.append(label);
  for (const y of [0.25, 0.5, 0.75]) chart.append(svg("line", { x1: 0, x2: W, y1: H * y, y2: H * y, class: "grid" }));
  const step = samples.length > 1 ? W / (samples.length - 1) : W;
  for (const d of series) {
    const points = samples.map((s, i) => `${(i * step).toFixed(1)},${(H - ((s.values[d.key] || 0) / max) * (H - 4) - 2).toFixed(1)}`);
    if (points.length === 1) points.push(`${W},${points[0].split(",")[1]}`);
    chart.append(svg("polyline", { points: points.join(" "), fill: "none", stroke: d.color, "stroke-width": 2,
      "vector-effect": "non-scaling-stroke" }));
  }
  const caption = document.createElement("figcaption");
  const last = samples[samples.length - 1];
  const head = document.createElement("strong");
  head.textContent = title;
  caption.append(head);
  for (const d of series) {
    const item = document.createElement("span");
    item.className = "key";
    const swatch = document.createElement("i");
    swatch.style.background = d.color;
    item.append(swatch, `${d.label} ${last ? (last.values[d.key] || 0).toFixed(2) : "0"}${unit}`);
    caption.append(" ", item);
  }
  figure.append(chart, caption);
  return figure;
}
