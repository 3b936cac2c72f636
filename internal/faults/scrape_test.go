package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// samples is one scrape of a /metrics page: the value of every sample, keyed
// by its name and labels exactly as exposed (`billing_events_total{outcome="duplicate"}`).
type samples map[string]float64

// parseMetrics reads the Prometheus text format (enough of it for our pages).
func parseMetrics(text string) samples {
	m := samples{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m
}

// Get is one sample, 0 when absent.
func (m samples) Get(key string) float64 { return m[key] }

// Sum adds every sample of a metric name, over all label values.
func (m samples) Sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

func (m samples) add(o samples) {
	for k, v := range o {
		m[k] += v
	}
}

// outcome is billing_events_total for one outcome.
func (m samples) outcome(o string) float64 {
	return m.Get(`billing_events_total{outcome="` + o + `"}`)
}

func scrape(ctx context.Context, addr string) (samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Close = true // no idle keep-alive connections left behind (goleak)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("faults: GET %s/metrics: %s", addr, resp.Status)
	}
	return parseMetrics(string(body)), nil
}

// waitOK polls url until it answers 200.
func waitOK(ctx context.Context, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%w: %s %s", errNotReady, resp.Status, strings.TrimSpace(string(body)))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("faults: %s: %w (last: %v)", url, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
