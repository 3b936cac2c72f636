package workerproc

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Samples is one scrape of a /metrics page: the value of every sample, keyed
// by its name and labels exactly as exposed (`billing_events_total{outcome="duplicate"}`).
type Samples map[string]float64

// Scrape reads http://addr/metrics within 5s.
func Scrape(ctx context.Context, addr string) (Samples, error) {
	body, err := get(ctx, "http://"+addr+"/metrics", 5*time.Second)
	if err != nil {
		return nil, err
	}
	return ParseSamples(body), nil
}

// ParseSamples reads the Prometheus text format (enough of it for our pages).
func ParseSamples(text string) Samples {
	m := Samples{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// Sum adds every sample of a metric name, over all label values.
func (m Samples) Sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// Add adds o's samples to m's.
func (m Samples) Add(o Samples) {
	for k, v := range o {
		m[k] += v
	}
}

// Bucket is one bucket of a classic histogram: Count observations were at
// most UpperBound (cumulative).
type Bucket struct{ UpperBound, Count float64 }

// Buckets are the histogram name's cumulative buckets, summed over its other
// labels, by ascending bound (+Inf last); nil when it has none.
func (m Samples) Buckets(name string) []Bucket {
	byBound := map[float64]float64{}
	for k, v := range m {
		labels, ok := strings.CutPrefix(k, name+"_bucket{")
		if !ok {
			continue
		}
		_, le, ok := strings.Cut(labels, `le="`)
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if !ok || err != nil {
			continue
		}
		byBound[bound] += v
	}
	var out []Bucket
	for bound, n := range byBound {
		out = append(out, Bucket{UpperBound: bound, Count: n})
	}
	slices.SortFunc(out, func(a, b Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	return out
}

// WaitOK polls url until it answers 200, for at most within.
func WaitOK(ctx context.Context, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		_, err := get(ctx, url, within)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workerproc: %s: %w (last: %v)", url, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// get reads url's body; a status other than 200 is an error.
func get(ctx context.Context, url string, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Close = true // no idle keep-alive connections left behind (goleak)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("workerproc: GET %s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}
