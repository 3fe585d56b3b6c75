// Mailforge dashboard: progressive enhancement only. Pages work without it; it adds copy buttons and draws the
// charts whose data the server put in data-chart attributes (the Content-Security-Policy allows no inline script).

const colors = ["#1d5fd1", "#1f7a3d", "#b42318", "#9a5b00", "#7c3aed"];

function drawChart(element) {
  if (element.dataset.drawn || typeof uPlot === "undefined") return;
  element.dataset.drawn = "true";
  const chart = JSON.parse(element.dataset.chart);
  const width = Math.max(200, element.clientWidth);
  const bars = chart.kind === "bars";
  const options = {
    width,
    height: 220,
    legend: { show: !bars },
    cursor: { show: !bars },
    scales: { x: { time: !bars, range: bars ? [-0.5, chart.x.length - 0.5] : undefined } },
    axes: [
      bars
        ? {
            values: (_u, ticks) => ticks.map((tick) => chart.categories[tick] ?? ""),
            splits: () => chart.x,
            // Five labels side by side do not fit a phone: tilt them.
            rotate: width < 420 ? -40 : 0,
            size: width < 420 ? 64 : 40,
          }
        : {},
      { size: 50, incrs: wholeSteps },
    ],
    // Away from the cursor the legend shows the period and each series' total, not uPlot's "--".
    series: [
      bars
        ? {}
        : {
            label: "Day",
            value: (_u, ts) => (ts == null ? `last ${chart.x.length} days` : new Date(ts * 1000).toISOString().slice(0, 10)),
          },
    ],
  };
  let data;
  if (bars) {
    // One bar per counter: a single series whose points are the categories.
    options.series.push({
      label: "Today",
      fill: colors[0],
      stroke: colors[0],
      paths: uPlot.paths.bars({ size: [0.6, 80] }),
      points: { show: false },
    });
    data = [chart.x, chart.series.map((series) => series.values[0])];
  } else {
    for (const [index, series] of chart.series.entries())
      options.series.push({
        label: series.label,
        stroke: colors[index % colors.length],
        width: 2,
        value: (_u, value) =>
          value == null ? `${series.values.reduce((sum, each) => sum + (each ?? 0), 0).toLocaleString("en")} in total` : value.toLocaleString("en"),
      });
    data = [chart.x, ...chart.series.map((series) => series.values)];
  }
  const plot = new uPlot(options, data, element);
  new ResizeObserver(() => plot.setSize({ width: Math.max(200, element.clientWidth), height: 220 })).observe(element);
}

// Counts are whole numbers: no 0.25 ticks on the y axis.
const wholeSteps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000];

/** Each cell learns its column's name, which the phone layout shows above the value. */
function labelCells(table) {
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, index) => {
      if (names[index]) cell.dataset.label = names[index];
    });
  }
}

function enhance(root) {
  for (const element of root.querySelectorAll("[data-chart]")) drawChart(element);
  for (const table of root.querySelectorAll(".table-wrap table")) labelCells(table);
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  try {
    await navigator.clipboard.writeText(button.dataset.copy);
    button.textContent = "Copied";
  } catch {
    // No clipboard (plain HTTP off localhost): select the text so the person can copy it themselves.
    const code = button.previousElementSibling;
    if (code) window.getSelection()?.selectAllChildren(code);
    button.textContent = "Selected";
  }
  setTimeout(() => (button.textContent = "Copy"), 1500);
});

// The phone menu: the button opens and closes the sections (CSS hides them only once this script runs).
document.documentElement.classList.add("js");
document.addEventListener("click", (event) => {
  const toggle = event.target.closest("button.menu-toggle");
  if (!toggle) return;
  const open = toggle.closest(".top").classList.toggle("nav-open");
  toggle.setAttribute("aria-expanded", String(open));
});

document.addEventListener("DOMContentLoaded", () => enhance(document));
document.addEventListener("htmx:afterSettle", (event) => enhance(event.target));
