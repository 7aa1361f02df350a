package flowcontrol

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
)

// Defaults of Options, kube-apiserver's.
const (
	// DefaultMaxRequestsInflight is --max-requests-inflight's default.
	DefaultMaxRequestsInflight = 400
	// DefaultMaxMutatingRequestsInflight is
	// --max-mutating-requests-inflight's default.
	DefaultMaxMutatingRequestsInflight = 200
	// DefaultWaitLimit is how long a request may wait in a queue: a
	// quarter of kube's default --request-timeout (1 minute).
	DefaultWaitLimit = 15 * time.Second
)

// Options configure a Controller.
type Options struct {
	// ServerConcurrencyLimit is the seats of all levels together:
	// --max-requests-inflight + --max-mutating-requests-inflight.
	ServerConcurrencyLimit int
	// WaitLimit bounds a request's time in a queue (0: DefaultWaitLimit).
	WaitLimit time.Duration
	// Count returns how many objects of a resource are stored, for the
	// work estimate of LISTs and watches (nil: every request one seat).
	Count func(group, resource string) int64
}

// Controller holds the flow control configuration the server runs on:
// the FlowSchemas compiled in matching order and a level per
// PriorityLevelConfiguration.
//
// Exactly as kube: classification (rules, subjects, precedence, ties by
// name, dangling schemas skipped), flows by user or namespace hashed per
// schema, shuffle sharding (kube's dealer, the least loaded queue of the
// hand), queue length limits, Reject levels, the nominal concurrency
// limit of each level (ceil(serverCL × shares / Σ shares)), the work
// estimate of LISTs and watches, watches holding seats only while they
// start, long-running requests (exec, attach, log, proxy, portforward)
// outside flow control, the exempt level unlimited, the response headers,
// the 429 (plain text, as kube's) and its Retry-After (kube's
// dropped-requests tracker).
//
// Simplified: levels do not lend or borrow seats (lendablePercent and
// borrowingLimitPercent are validated and stored, not acted on; kube
// adjusts each level's limit every 10 s by the seats others leave idle);
// fair queuing is start-time fair queuing over the queues' seat-seconds
// (charged a moving average at dispatch and corrected by the real
// duration at the end) rather than kube's exact virtual-time algorithm;
// mutating requests take one seat (kube adds a little for each watcher
// they notify); a queued request waits at most WaitLimit (kube: a quarter
// of the request's timeout).
type Controller struct {
	opts      Options
	waitLimit time.Duration
	count     func(group, resource string) int64

	cfg atomic.Pointer[config]

	// mu serializes configuration changes.
	mu sync.Mutex
	// levels are the current levels by name.
	levels map[string]*level

	rejected   atomic.Int64
	rejections rejections
}

// config is one immutable configuration.
type config struct {
	schemas  []*schema
	fallback *schema
}

// New returns a Controller running on kube's bootstrap configuration until
// Update gives it the stored one.
func New(opts Options) *Controller {
	if opts.ServerConcurrencyLimit <= 0 {
		opts.ServerConcurrencyLimit = DefaultMaxRequestsInflight + DefaultMaxMutatingRequestsInflight
	}
	c := &Controller{opts: opts, waitLimit: opts.WaitLimit, count: opts.Count, levels: map[string]*level{}}
	if c.waitLimit <= 0 {
		c.waitLimit = DefaultWaitLimit
	}
	b := BootstrapConfiguration()
	c.Update(b.FlowSchemas, b.PriorityLevels)
	return c
}

// Rejected counts the requests answered 429.
func (c *Controller) Rejected() int64 { return c.rejected.Load() }

// Update replaces the configuration: levels keep their queues and seats
// in use when their name and uid stay; new limits apply at once.
func (c *Controller) Update(flowSchemas []*flowcontrolv1.FlowSchema, priorityLevels []*flowcontrolv1.PriorityLevelConfiguration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	shares := func(pl *flowcontrolv1.PriorityLevelConfiguration) int {
		switch {
		case pl.Spec.Limited != nil && pl.Spec.Limited.NominalConcurrencyShares != nil:
			return int(*pl.Spec.Limited.NominalConcurrencyShares)
		case pl.Spec.Limited != nil:
			return 30
		case pl.Spec.Exempt != nil && pl.Spec.Exempt.NominalConcurrencyShares != nil:
			return int(*pl.Spec.Exempt.NominalConcurrencyShares)
		}
		return 0
	}
	sum := 0
	for _, pl := range priorityLevels {
		sum += shares(pl)
	}
	serverCL := c.opts.ServerConcurrencyLimit
	levels := map[string]*level{}
	for _, pl := range priorityLevels {
		exempt := pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt
		lvl := c.levels[pl.Name]
		if lvl == nil || lvl.uid != string(pl.UID) || lvl.exempt != exempt {
			lvl = newLevel(pl.Name, string(pl.UID), exempt)
		}
		levels[pl.Name] = lvl
		if exempt || pl.Spec.Limited == nil {
			continue
		}
		limit := 0
		if sum > 0 {
			limit = int(math.Ceil(float64(serverCL) * float64(shares(pl)) / float64(sum)))
		}
		lr := pl.Spec.Limited.LimitResponse
		if q := lr.Queuing; lr.Type == flowcontrolv1.LimitResponseTypeQueue && q != nil {
			lvl.configure(limit, false, int(q.Queues), int(q.HandSize), int(q.QueueLengthLimit))
		} else {
			lvl.configure(limit, true, 0, 0, 0)
		}
	}
	cfg := &config{}
	for _, fs := range flowSchemas {
		if lvl := levels[fs.Spec.PriorityLevelConfiguration.Name]; lvl != nil {
			cfg.schemas = append(cfg.schemas, compileSchema(fs, lvl))
		}
	}
	sortSchemas(cfg.schemas)
	cfg.fallback = c.fallback(levels, serverCL, sum)
	c.levels = levels
	c.cfg.Store(cfg)
}

// fallback is the schema of requests no schema matches (only while the
// mandatory catch-all is missing): kube's catch-all, on the stored
// catch-all level or, without one, a level like the bootstrap's.
func (c *Controller) fallback(levels map[string]*level, serverCL, sum int) *schema {
	b := BootstrapConfiguration()
	var fs *flowcontrolv1.FlowSchema
	for _, f := range b.FlowSchemas {
		if f.Name == flowcontrolv1.FlowSchemaNameCatchAll {
			fs = f
		}
	}
	lvl := levels[flowcontrolv1.PriorityLevelConfigurationNameCatchAll]
	if lvl == nil {
		lvl = c.levels[fallbackLevel]
		if lvl == nil {
			lvl = newLevel(flowcontrolv1.PriorityLevelConfigurationNameCatchAll, "", false)
		}
		levels[fallbackLevel] = lvl
		lvl.configure(int(math.Ceil(float64(serverCL)*5/float64(max(sum, 5)))), true, 0, 0, 0)
	}
	s := compileSchema(fs, lvl)
	s.uid = ""
	return s
}

// fallbackLevel keys the fallback's own level among the levels: a name no
// object can have.
const fallbackLevel = "\x00fallback"

// classify returns the first schema matching the request.
func (c *Controller) classify(u *user.Info, ri *handlers.RequestInfo) *schema {
	cfg := c.cfg.Load()
	for _, s := range cfg.schemas {
		if s.matches(u, ri) {
			return s
		}
	}
	return cfg.fallback
}

// Classification names the schema and level a request falls in.
type Classification struct {
	FlowSchema, PriorityLevel string
	Exempt                    bool
}

// Classify tells where a request of u asking for ri goes (for tests and
// debugging).
func (c *Controller) Classify(u *user.Info, ri *handlers.RequestInfo) Classification {
	s := c.classify(u, ri)
	return Classification{FlowSchema: s.name, PriorityLevel: s.level.name, Exempt: s.level.exempt}
}

// LevelLimit returns a level's concurrency limit in seats (-1: no such
// limited level).
func (c *Controller) LevelLimit(name string) int {
	c.mu.Lock()
	lvl := c.levels[name]
	c.mu.Unlock()
	if lvl == nil || lvl.exempt {
		return -1
	}
	lvl.mu.Lock()
	defer lvl.mu.Unlock()
	return lvl.limit
}
