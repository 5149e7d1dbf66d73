// Draws an evo report's charts with Chart.js from the JSON embedded in the page
// (#evo-report-data), then writes into #evo-render-status what it drew: every chart with the
// points of each dataset as Chart.js laid them out, or the errors met on the way. People see the
// errors on the page; tests read the counts.
(function () {
  'use strict';

  const statusElement = document.getElementById('evo-render-status');
  const errors = [];
  const drawn = [];

  function writeStatus(state) {
    statusElement.dataset.state = state;
    statusElement.textContent = JSON.stringify({ state: state, errors: errors, charts: drawn });
    if (errors.length > 0) statusElement.classList.add('failed');
  }

  window.addEventListener('error', function (event) {
    errors.push(String(event.message));
    writeStatus('failed');
  });

  // How each candidate was made (the provenance the store records) and its status.
  const MADE_COLORS = {
    'default': '#1f77b4',
    'starting point': '#9467bd',
    'neighbour scan': '#17becf',
    'knob marginals': '#e377c2',
    'cost model': '#2ca02c',
    'mutation': '#bcbd22',
    'crossover': '#ff7f0e',
    'random': '#7f7f7f',
    'other': '#8c564b',
  };
  const STATUS_COLORS = {
    'measured': '#2ca02c',
    'slow': '#bcbd22',
    'incorrect': '#d62728',
    'runtime_error': '#e377c2',
    'timeout': '#8c564b',
    'compile_error': '#7f7f7f',
    'resource_reject': '#17becf',
    'compiled': '#aec7e8',
    'invalid': '#c7c7c7',
    'pending': '#ffbb78',
  };
  // Only measured and slow candidates have a median; the others appear in the status chart.
  const STATUS_POINTS = { 'measured': 'circle', 'slow': 'triangle' };
  const PEER_COLORS = ['#d62728', '#17becf', '#e377c2', '#8c564b', '#bcbd22'];

  // A logarithmic axis around the medians, rather than from the power of ten below them.
  function medianAxis(candidates) {
    const medians = candidates.map(function (c) { return c.median_us; });
    const axis = { type: 'logarithmic', title: { display: true, text: 'median us' } };
    if (medians.length) {
      axis.min = Math.min.apply(null, medians) * 0.9;
      axis.max = Math.max.apply(null, medians) * 1.1;
    }
    return axis;
  }

  function colorOf(table, key) {
    return table[key] || '#444';
  }

  function candidateLabel(c) {
    const genome = Object.keys(c.genome).map(function (k) { return k + '=' + c.genome[k]; });
    return ['#' + c.id + ' gen ' + c.generation + ', ' + c.status + ': ' + c.operator,
            genome.join(' ')];
  }

  function addChart(container, run, key, title, caption, config) {
    const box = document.createElement('div');
    box.className = 'chart';
    const heading = document.createElement('h4');
    heading.textContent = title;
    const note = document.createElement('p');
    note.className = 'caption';
    note.textContent = caption;
    const canvasBox = document.createElement('div');
    canvasBox.className = 'canvas-box';
    const canvas = document.createElement('canvas');
    canvas.id = 'run' + run.id + '-' + key;
    canvasBox.appendChild(canvas);
    box.appendChild(heading);
    box.appendChild(note);
    box.appendChild(canvasBox);
    container.appendChild(box);

    config.options = Object.assign({ animation: false, responsive: true,
                                     maintainAspectRatio: false }, config.options || {});
    const chart = new Chart(canvas, config);
    const datasets = chart.data.datasets.map(function (dataset, index) {
      const elements = chart.getDatasetMeta(index).data;
      let sum = 0;
      dataset.data.forEach(function (value) {
        const y = (value !== null && typeof value === 'object') ? value.y : value;
        if (typeof y === 'number') sum += y;
      });
      return {
        label: dataset.label,
        values: dataset.data.length,
        points: elements.filter(function (element) { return !element.skip; }).length,
        sum: sum,
      };
    });
    drawn.push({ id: canvas.id, run: run.id, chart: key, datasets: datasets });
  }

  function peerLines(run, firstX, lastX) {
    return run.peers.map(function (peer, index) {
      return {
        label: peer.name + ' (peer)',
        data: [{ x: firstX, y: peer.us }, { x: lastX, y: peer.us }],
        borderColor: PEER_COLORS[index % PEER_COLORS.length],
        borderDash: [6, 4],
        pointRadius: 0,
        showLine: true,
      };
    });
  }

  function bestSoFar(container, run, key, xs, xTitle) {
    const progress = run.progress;
    const points = [];
    for (let i = 0; i < xs.length; ++i) {
      if (xs[i] === null) continue;
      points.push({ x: xs[i], y: progress.best_us[i], id: progress.candidate[i] });
    }
    const known = xs.filter(function (x) { return x !== null; });
    const first = known.length ? Math.min.apply(null, known) : 0;
    const last = known.length ? Math.max.apply(null, known) : 1;
    const peers = run.peers.length
      ? 'Peers as dashed lines.'
      : 'No peer times are known for this run.';
    addChart(container, run, key, 'Best so far against ' + xTitle,
      'The score (the slower of two medians) of the best candidate so far, in microseconds. ' +
      peers, {
        type: 'line',
        data: {
          datasets: [{
            label: 'evo best so far',
            data: points,
            stepped: 'before',
            borderColor: '#1f77b4',
            backgroundColor: '#1f77b4',
            pointRadius: 1.5,
          }].concat(peerLines(run, first, last)),
        },
        options: {
          scales: {
            x: { type: 'linear', title: { display: true, text: xTitle } },
            y: { title: { display: true, text: 'us' } },
          },
        },
      });
  }

  function mediansByGeneration(container, run) {
    const timed = run.candidates.filter(function (c) { return c.median_us !== null; });
    let lastGeneration = 0;
    run.candidates.forEach(function (c) { lastGeneration = Math.max(lastGeneration, c.generation); });
    const byGeneration = {};
    timed.forEach(function (c) {
      (byGeneration[c.generation] = byGeneration[c.generation] || []).push(c);
    });
    // Spread a generation's points across its column so that they do not hide each other.
    const offset = new Map();
    Object.keys(byGeneration).forEach(function (g) {
      const members = byGeneration[g];
      members.forEach(function (c, k) {
        offset.set(c.id, (k + 0.5) / members.length * 0.7 - 0.35);
      });
    });
    const datasets = Object.keys(MADE_COLORS).map(function (made) {
      const members = timed.filter(function (c) { return c.made === made; });
      return {
        label: made,
        data: members.map(function (c) {
          return { x: c.generation + offset.get(c.id), y: c.median_us, c: c };
        }),
        pointStyle: members.map(function (c) { return STATUS_POINTS[c.status] || 'crossRot'; }),
        backgroundColor: MADE_COLORS[made],
        borderColor: MADE_COLORS[made],
        pointRadius: 3.5,
      };
    }).filter(function (dataset) { return dataset.data.length > 0; });
    addChart(container, run, 'medians', 'Every candidate\'s median by generation',
      'First median in microseconds, coloured by how the candidate was made; circles are ' +
      'measured, triangles slow. Candidates without a time are in the status chart.', {
        type: 'scatter',
        data: { datasets: datasets },
        options: {
          scales: {
            x: {
              type: 'linear', min: -0.5, max: lastGeneration + 0.5,
              title: { display: true, text: 'generation' },
              afterBuildTicks: function (axis) {
                axis.ticks = [];
                for (let g = 0; g <= lastGeneration; ++g) axis.ticks.push({ value: g });
              },
            },
            y: medianAxis(timed),
          },
          plugins: {
            tooltip: { callbacks: { label: function (ctx) { return candidateLabel(ctx.raw.c); } } },
          },
        },
      });
  }

  function statusesByGeneration(container, run) {
    let last = 0;
    run.candidates.forEach(function (c) { last = Math.max(last, c.generation); });
    const generations = [];
    for (let g = 0; g <= last; ++g) generations.push(g);
    const present = Object.keys(STATUS_COLORS).filter(function (status) {
      return run.candidates.some(function (c) { return c.status === status; });
    });
    run.candidates.forEach(function (c) {
      if (present.indexOf(c.status) < 0) present.push(c.status);  // a status this page lacks
    });
    const datasets = present.map(function (status) {
      return {
        label: status,
        data: generations.map(function (g) {
          return run.candidates.filter(function (c) {
            return c.generation === g && c.status === status;
          }).length;
        }),
        backgroundColor: colorOf(STATUS_COLORS, status),
      };
    });
    addChart(container, run, 'statuses', 'Candidates by generation and status',
      'Every candidate of the run, pending ones included.', {
        type: 'bar',
        data: { labels: generations.map(String), datasets: datasets },
        options: {
          scales: {
            x: { stacked: true, title: { display: true, text: 'generation' } },
            y: { stacked: true, title: { display: true, text: 'candidates' } },
          },
        },
      });
  }

  function knobLandscape(container, run, knob) {
    const timed = run.candidates.filter(function (c) {
      return c.median_us !== null && c.genome[knob.name] !== undefined;
    });
    const index = new Map(knob.values.map(function (v, i) { return [v, i]; }));
    const perValue = knob.values.map(function () { return []; });
    timed.forEach(function (c) { perValue[index.get(c.genome[knob.name])].push(c); });
    const points = [];
    const fastest = [];
    perValue.forEach(function (members, i) {
      members.forEach(function (c, k) {
        points.push({ x: i + (k + 0.5) / members.length * 0.5 - 0.25, y: c.median_us, c: c });
      });
      if (members.length) {
        fastest.push({ x: i, y: Math.min.apply(null, members.map(function (c) {
          return c.median_us;
        })) });
      }
    });
    addChart(container, run, 'knob-' + knob.name, knob.name + ': medians by value',
      'Each timed candidate\'s first median at its value of ' + knob.name +
      ', and the fastest per value.', {
        type: 'scatter',
        data: {
          datasets: [{
            label: 'medians',
            data: points,
            pointStyle: points.map(function (p) { return STATUS_POINTS[p.c.status] || 'crossRot'; }),
            backgroundColor: 'rgba(31, 119, 180, 0.45)',
            borderColor: 'rgba(31, 119, 180, 0.8)',
            pointRadius: 3,
          }, {
            label: 'fastest',
            data: fastest,
            showLine: true,
            borderColor: '#d62728',
            backgroundColor: '#d62728',
            pointRadius: 4,
          }],
        },
        options: {
          scales: {
            x: {
              type: 'linear', min: -0.5, max: knob.values.length - 0.5,
              title: { display: true, text: knob.name },
              // One tick per value tried, at its index, labelled with the value.
              afterBuildTicks: function (axis) {
                axis.ticks = knob.values.map(function (value, i) { return { value: i }; });
              },
              ticks: {
                callback: function (value) { return String(knob.values[value]); },
              },
            },
            y: medianAxis(timed),
          },
          plugins: {
            tooltip: {
              callbacks: {
                label: function (ctx) {
                  return ctx.raw.c ? candidateLabel(ctx.raw.c) : 'fastest ' + ctx.raw.y + ' us';
                },
              },
            },
          },
        },
      });
  }

  function resourcesOverTime(container, run) {
    const compiled = run.candidates.filter(function (c) {
      return c.registers !== null && c.time_s !== null;
    });
    addChart(container, run, 'resources', 'Registers and shared memory against time',
      'ptxas figures of every compiled candidate, at the time it finished (seconds since the ' +
      'run was created, pauses included).', {
        type: 'scatter',
        data: {
          datasets: [{
            label: 'registers per thread',
            data: compiled.map(function (c) { return { x: c.time_s, y: c.registers, c: c }; }),
            backgroundColor: '#1f77b4',
            yAxisID: 'y',
            pointRadius: 2.5,
          }, {
            label: 'shared memory KiB (static + dynamic)',
            data: compiled.map(function (c) { return { x: c.time_s, y: c.smem_bytes / 1024, c: c }; }),
            backgroundColor: '#ff7f0e',
            pointStyle: 'rect',
            yAxisID: 'y1',
            pointRadius: 2.5,
          }],
        },
        options: {
          scales: {
            x: { type: 'linear', title: { display: true, text: 'seconds' } },
            y: { position: 'left', title: { display: true, text: 'registers' } },
            y1: { position: 'right', title: { display: true, text: 'KiB' },
                  grid: { drawOnChartArea: false } },
          },
          plugins: {
            tooltip: { callbacks: { label: function (ctx) { return candidateLabel(ctx.raw.c); } } },
          },
        },
      });
  }

  function drawRun(run) {
    const container = document.querySelector('.charts[data-run="' + run.id + '"]');
    if (!container) throw new Error('the page has no chart area for run ' + run.id);
    bestSoFar(container, run, 'best-count', run.progress.count, 'candidates evaluated');
    bestSoFar(container, run, 'best-time', run.progress.time_s, 'seconds since the run began');
    mediansByGeneration(container, run);
    statusesByGeneration(container, run);
    run.knobs.forEach(function (knob) { knobLandscape(container, run, knob); });
    resourcesOverTime(container, run);
  }

  try {
    const data = JSON.parse(document.getElementById('evo-report-data').textContent);
    data.runs.forEach(drawRun);
  } catch (error) {
    errors.push(String(error && error.stack ? error.stack : error));
  }
  writeStatus(errors.length ? 'failed' : 'drawn');
})();
