package load

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100
// on every Linux architecture Go supports (the kernel's ABI, whatever HZ is).
const clockTick = 10 * time.Millisecond

// cpuTime is the user plus system CPU time a process (all its threads) has
// used so far, from /proc/<pid>/stat.
func cpuTime(proc string, pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime + stime (fields 14 and 15) of a stat line. The command
// name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(line string) (time.Duration, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, fmt.Errorf("load: stat line without a command name: %.60q", line)
	}
	fields := strings.Fields(line[end+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("load: stat line with %d fields after the command name, want 13 or more", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("load: stat utime/stime %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// rss is a process's resident set size in bytes, from /proc/<pid>/status.
func rss(proc string, pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(string(b))
}

// parseVmRSS reads the "VmRSS:   1234 kB" line of a status file.
func parseVmRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("load: VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("load: VmRSS line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("load: no VmRSS line (a kernel thread, or a zombie)")
}

// errNotLocal: the server runs elsewhere, or no local process could be
// named as the one serving its address.
var errNotLocal = errors.New("not a local process")

// serverPID finds the local process of a server reached at addr (host:port):
// a process named one of names that holds the socket listening on the port.
// Several servers of a kind may run (tests start their own on spare ports),
// so the name alone decides only when exactly one such process exists.
func serverPID(proc, addr string, names ...string) (int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("load: address %q: %w", addr, err)
	}
	if !loopback(host) {
		return 0, fmt.Errorf("%w: %s is not on this machine's loopback", errNotLocal, host)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return 0, fmt.Errorf("load: port of %q: %w", addr, err)
	}
	candidates := processesNamed(proc, names...)
	inodes := listeningInodes(proc, port)
	for _, pid := range candidates {
		if holdsSocket(proc, pid, inodes) {
			return pid, nil
		}
	}
	if len(candidates) == 1 && len(inodes) == 0 {
		return candidates[0], nil // socket tables unreadable: the only one of its name
	}
	return 0, fmt.Errorf("%w: none of %d %v processes listens on port %d", errNotLocal, len(candidates), names, port)
}

func loopback(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// processesNamed lists the pids whose /proc/<pid>/comm is one of names.
func processesNamed(proc string, names ...string) []int {
	entries, _ := os.ReadDir(proc) // unreadable: no candidates
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.TrimSpace(string(comm)) == n {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// listeningInodes are the socket inodes listening on port, over IPv4 and IPv6.
func listeningInodes(proc string, port int) map[string]bool {
	inodes := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(proc, "net", table))
		if err != nil {
			continue
		}
		for _, inode := range parseListeners(string(b), port) {
			inodes[inode] = true
		}
	}
	return inodes
}

// parseListeners reads a /proc/net/tcp table: the inodes of sockets in state
// LISTEN (0A) whose local port (hex, after the ':') is port.
func parseListeners(table string, port int) []string {
	var out []string
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
			out = append(out, f[9])
		}
	}
	return out
}

func holdsSocket(proc string, pid int, inodes map[string]bool) bool {
	if len(inodes) == 0 {
		return false
	}
	dir := filepath.Join(proc, strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true
		}
	}
	return false
}

// machineBusy is the CPU time all of the machine's CPUs spent busy so far
// (anything but idle and iowait), from /proc/stat.
func machineBusy(proc string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPULine(line)
}

// parseCPULine reads the aggregate "cpu user nice system idle iowait irq
// softirq steal ..." line of /proc/stat: busy = all but idle and iowait
// (guest time is already inside user).
func parseCPULine(line string) (time.Duration, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("load: /proc/stat first line %.60q", line)
	}
	var busy uint64
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("load: /proc/stat field %d %q: %w", i+1, v, err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * clockTick, nil
}
