// Package outcome prints a probe's verdict: one JSON line on stdout, exactly once even when the
// main path and its watchdog race, and then exits, 0 when the probe succeeded, 1 otherwise.
package outcome

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

var (
	mu      sync.Mutex
	printed bool
	// how far the main path got, for the watchdog's verdict
	stage atomic.Value
)

// SetStage records how far the main path got.
func SetStage(s string) { stage.Store(s) }

// Report prints v as one JSON line, unless a verdict was printed already, and exits: 0 when ok.
func Report(v any, ok bool) {
	mu.Lock()
	if printed {
		mu.Unlock()
		select {} // the other path is exiting
	}
	printed = true
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
	if ok {
		os.Exit(0)
	}
	os.Exit(1)
}

// Watchdog reports, as a failure, what timedOut makes of the stage reached once timeout has
// passed (unless the main path reported first).
func Watchdog(timeout time.Duration, timedOut func(stage string) any) {
	go func() {
		time.Sleep(timeout)
		s, _ := stage.Load().(string)
		Report(timedOut(s), false)
	}()
}
