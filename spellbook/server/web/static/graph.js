// The memory graph: a force layout on a canvas, no library. Nodes start clustered by category
// (one circle per category), then springs pull linked memories together and a grid-based
// repulsion (only neighbouring cells, so it stays fast at a few thousand nodes) spreads them.
(function () {
  "use strict";
  const canvas = document.getElementById("graph");
  const source = document.getElementById("graph-data");
  if (!canvas || !source) return;
  const data = JSON.parse(source.textContent);
  const nodes = data.nodes, byId = new Map();
  const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#7f7f7f", "#2f4b7c", "#a05195"];
  const cats = [...new Set(nodes.map(n => n.category || "(none)"))].sort();
  const color = new Map(cats.map((c, i) => [c, palette[i % palette.length]]));
  const R = Math.max(250, Math.sqrt(nodes.length) * 28);
  cats.forEach((c, i) => {
    const members = nodes.filter(n => (n.category || "(none)") === c);
    const a = (2 * Math.PI * i) / cats.length, cx = cats.length > 1 ? Math.cos(a) * R : 0,
      cy = cats.length > 1 ? Math.sin(a) * R : 0, r = Math.sqrt(members.length) * 14;
    members.forEach((n, j) => {
      const t = j * 2.39996, d = r * Math.sqrt((j + 0.5) / members.length);
      n.x = cx + Math.cos(t) * d; n.y = cy + Math.sin(t) * d; n.vx = 0; n.vy = 0;
    });
  });
  nodes.forEach(n => byId.set(n.id, n));
  const edges = data.edges.map(e => ({ s: byId.get(e.source), t: byId.get(e.target), rel: e.relations }))
    .filter(e => e.s && e.t);
  // Zoomed out, only the most-linked ~20 memories carry a label.
  const hub = Math.max(3, [...nodes].map(n => n.degree || 0).sort((a, b) => b - a)[Math.min(nodes.length - 1, 20)] + 1 || 3);
  canvas.dataset.nodes = nodes.length;
  canvas.dataset.edges = edges.length;

  function step(alpha) {
    const cell = 60, grid = new Map();
    for (const n of nodes) {
      const k = Math.floor(n.x / cell) + "," + Math.floor(n.y / cell);
      (grid.get(k) || grid.set(k, []).get(k)).push(n);
    }
    for (const n of nodes) {
      const gx = Math.floor(n.x / cell), gy = Math.floor(n.y / cell);
      for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) {
        const bucket = grid.get((gx + dx) + "," + (gy + dy));
        if (!bucket) continue;
        for (const m of bucket) {
          if (m === n) continue;
          let x = n.x - m.x, y = n.y - m.y, d2 = x * x + y * y || 0.01;
          if (d2 > cell * cell * 4) continue;
          const f = (alpha * 180) / d2;
          n.vx += x * f; n.vy += y * f;
        }
      }
    }
    for (const e of edges) {
      const x = e.t.x - e.s.x, y = e.t.y - e.s.y, d = Math.sqrt(x * x + y * y) || 1;
      const f = (alpha * (d - 70)) / d * 0.04;
      e.s.vx += x * f; e.s.vy += y * f; e.t.vx -= x * f; e.t.vy -= y * f;
    }
    for (const n of nodes) {
      if (n === dragging) continue;
      n.x += n.vx; n.y += n.vy; n.vx *= 0.6; n.vy *= 0.6;
    }
  }

  const ctx = canvas.getContext("2d");
  let scale = 1, ox = 0, oy = 0, hover = null, dragging = null, panning = null, found = null;
  function resize() {
    const ratio = window.devicePixelRatio || 1, w = canvas.clientWidth, h = canvas.clientHeight;
    canvas.width = w * ratio; canvas.height = h * ratio; ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }
  function fit() {
    if (!nodes.length) return;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of nodes) { x0 = Math.min(x0, n.x); y0 = Math.min(y0, n.y); x1 = Math.max(x1, n.x); y1 = Math.max(y1, n.y); }
    const w = canvas.clientWidth, h = canvas.clientHeight;
    scale = Math.min(2, 0.9 * Math.min(w / (x1 - x0 + 240), h / (y1 - y0 + 60)));
    x1 += 120 / scale;
    ox = w / 2 - scale * (x0 + x1) / 2; oy = h / 2 - scale * (y0 + y1) / 2;
  }
  function radius(n) { return 3 + Math.min(9, Math.sqrt(n.degree || 0) * 1.6); }
  function draw() {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    ctx.clearRect(0, 0, w, h);
    ctx.save(); ctx.translate(ox, oy); ctx.scale(scale, scale);
    ctx.lineWidth = 0.7 / scale; ctx.strokeStyle = "rgba(90,100,120,0.28)";
    ctx.beginPath();
    for (const e of edges) { ctx.moveTo(e.s.x, e.s.y); ctx.lineTo(e.t.x, e.t.y); }
    ctx.stroke();
    for (const n of nodes) {
      ctx.beginPath(); ctx.arc(n.x, n.y, radius(n), 0, 2 * Math.PI);
      ctx.fillStyle = color.get(n.category || "(none)"); ctx.fill();
      if (n === hover || n === found) { ctx.lineWidth = 2.5 / scale; ctx.strokeStyle = "#111"; ctx.stroke(); }
    }
    const labelled = scale > 1.5 ? nodes : nodes.filter(n => n === hover || n === found || n.degree >= hub);
    ctx.fillStyle = "#222"; ctx.font = `${12 / scale}px system-ui, sans-serif`;
    for (const n of labelled) ctx.fillText(n.title, n.x + radius(n) + 2 / scale, n.y + 4 / scale);
    ctx.restore();
  }
  function at(ev) {
    const r = canvas.getBoundingClientRect(), x = (ev.clientX - r.left - ox) / scale, y = (ev.clientY - r.top - oy) / scale;
    let best = null, bd = Infinity;
    for (const n of nodes) {
      const d = (n.x - x) ** 2 + (n.y - y) ** 2, rr = (radius(n) + 3 / scale) ** 2;
      if (d < rr && d < bd) { best = n; bd = d; }
    }
    return best;
  }
  const tip = document.getElementById("graph-tip");
  canvas.addEventListener("mousemove", ev => {
    if (panning) { ox += ev.movementX; oy += ev.movementY; draw(); return; }
    if (dragging) {
      const r = canvas.getBoundingClientRect();
      dragging.x = (ev.clientX - r.left - ox) / scale; dragging.y = (ev.clientY - r.top - oy) / scale; draw(); return;
    }
    hover = at(ev);
    canvas.style.cursor = hover ? "pointer" : "grab";
    if (hover) {
      tip.hidden = false; tip.textContent = `${hover.title} · ${hover.category || ""}${hover.topic ? " / " + hover.topic : ""}`;
      tip.style.left = ev.offsetX + 12 + "px"; tip.style.top = ev.offsetY + 12 + "px";
    } else tip.hidden = true;
    draw();
  });
  let moved = false;
  canvas.addEventListener("mousedown", ev => { moved = false; dragging = at(ev); if (!dragging) panning = true; });
  canvas.addEventListener("mousemove", () => { moved = true; });
  window.addEventListener("mouseup", ev => {
    const clicked = dragging && !moved ? dragging : null;
    dragging = null; panning = null;
    if (clicked) window.location.href = "/memory/" + encodeURIComponent(clicked.id);
  });
  canvas.addEventListener("wheel", ev => {
    ev.preventDefault();
    const k = Math.exp(-ev.deltaY * 0.0015), r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    ox = x - (x - ox) * k; oy = y - (y - oy) * k; scale *= k; draw();
  }, { passive: false });
  const find = document.getElementById("find");
  if (find) find.addEventListener("input", () => {
    const q = find.value.trim().toLowerCase();
    found = q ? nodes.find(n => n.title.toLowerCase().includes(q)) || null : null;
    if (found) { ox = canvas.clientWidth / 2 - found.x * scale; oy = canvas.clientHeight / 2 - found.y * scale; }
    draw();
  });
  const legend = document.getElementById("graph-legend");
  for (const c of cats) {
    const item = document.createElement("span"), dot = document.createElement("i");
    dot.style.background = color.get(c); item.append(dot, document.createTextNode(c)); legend.append(item);
  }
  resize();
  const rounds = nodes.length > 2000 ? 60 : 150;
  let round = 0;
  function settle() {
    const start = performance.now();
    while (round < rounds && performance.now() - start < 30) { step(1 - round / rounds); round++; }
    fit(); draw();
    if (round < rounds) requestAnimationFrame(settle);
    else canvas.dataset.ready = "1";
  }
  window.addEventListener("resize", () => { resize(); fit(); draw(); });
  settle();
})();
