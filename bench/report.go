package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"strings"
)

// reportQuantiles are the x positions of the latency plot.
var reportQuantiles = []float64{0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// writeReport writes an HTML page with two SVG plots: latency by
// percentile (every target's runs merged) and decisions/s per round.
func writeReport(path string, rs []result) error {
	var targets []string
	merged := map[string]*hist{}
	for _, r := range rs {
		if merged[r.Target] == nil {
			merged[r.Target] = &hist{}
			targets = append(targets, r.Target)
		}
		merged[r.Target].merge(r.hist)
	}
	var b strings.Builder
	b.WriteString("<!doctype html><meta charset=utf-8><title>sluice bench</title>")
	b.WriteString("<style>body{font:14px sans-serif;margin:2em}svg{background:#fff;border:1px solid #ddd}</style>")
	b.WriteString("<h1>sluice bench</h1>")

	b.WriteString("<h2>Latency by percentile (µs, log scale)</h2>")
	series := make([][]float64, len(targets))
	for i, t := range targets {
		for _, q := range reportQuantiles {
			series[i] = append(series[i], float64(max(merged[t].quantile(q), 1)))
		}
	}
	labels := make([]string, len(reportQuantiles))
	for i, q := range reportQuantiles {
		labels[i] = strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("p%.2f", q*100), "0"), ".")
	}
	lineChart(&b, targets, labels, series, true)

	b.WriteString("<h2>Decisions per second, by round</h2>")
	rounds := 0
	for _, r := range rs {
		rounds = max(rounds, r.Round)
	}
	series = make([][]float64, len(targets))
	labels = make([]string, rounds)
	for i := range labels {
		labels[i] = fmt.Sprintf("round %d", i+1)
	}
	for i, t := range targets {
		series[i] = make([]float64, rounds)
		for _, r := range rs {
			if r.Target == t {
				series[i][r.Round-1] = r.OpsPerSec
			}
		}
	}
	lineChart(&b, targets, labels, series, false)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// lineChart draws one polyline per series over shared x labels.
func lineChart(b *strings.Builder, names, xlabels []string, series [][]float64, logY bool) {
	const w, h, left, bottom, top, right = 720.0, 320.0, 70.0, 40.0, 20.0, 140.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if !logY {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	scale := func(v float64) float64 {
		if logY {
			return (math.Log10(v) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
		}
		return (v - lo) / (hi - lo)
	}
	x := func(i int) float64 {
		if len(xlabels) == 1 {
			return left
		}
		return left + float64(i)*(w-left-right)/float64(len(xlabels)-1)
	}
	y := func(v float64) float64 { return h - bottom - scale(v)*(h-bottom-top) }
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f">`, w, h)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`, left, top, left, h-bottom)
	for i, l := range xlabels {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="middle">%s</text>`, x(i), h-bottom+16, html.EscapeString(l))
	}
	mid := (lo + hi) / 2
	if logY {
		mid = math.Sqrt(lo * hi)
	}
	for _, v := range []float64{lo, mid, hi} {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%.0f</text>`, left-6, y(v)+4, v)
	}
	for i, s := range series {
		color := palette[i%len(palette)]
		var pts []string
		for j, v := range s {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(j), y(v)))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="12" fill="%s">%s</text>`, w-right+10, top+16*float64(i+1), color, html.EscapeString(names[i]))
	}
	b.WriteString("</svg>")
}
