package admission

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are kube-apiserver v1.32's apiserver_admission_* metrics, by
// kube's names, help texts (with component-base's stability prefix),
// labels and buckets. One server has one Metrics, registered with its own
// registry; a nil *Metrics records nothing, at the cost of a nil check.
//
// The chain's observations (a few per write) go through label children
// cached per plugin, operation and outcome, so that a create pays for no
// label lookup; webhook observations look their children up, a webhook
// call costing far more than that.
type Metrics struct {
	step        *prometheus.HistogramVec
	stepSummary *prometheus.SummaryVec
	controller  *prometheus.HistogramVec
	webhook     *prometheus.HistogramVec

	webhookRejection *prometheus.CounterVec
	webhookFailOpen  *prometheus.CounterVec
	webhookRequest   *prometheus.CounterVec

	matchConditionErrors     *prometheus.CounterVec
	matchConditionExclusions *prometheus.CounterVec
	matchConditionSeconds    *prometheus.HistogramVec

	// steps caches the step histogram's and summary's children.
	steps outcomeCells
}

// kube's admission latency buckets: 5 ms to 2.5 s, up to 25 s for
// webhooks (which time out after 10 s by default, 30 s at most).
var (
	admissionBuckets        = []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5}
	webhookBuckets          = []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25}
	matchConditionBuckets   = []float64{0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25}
	latencySummaryMaxAge    = 5 * time.Hour
	stepLabels              = []string{"type", "operation", "rejected"}
	namedStepLabels         = []string{"name", "type", "operation", "rejected"}
	matchConditionLabelKeys = []string{"name", "kind", "type", "operation"}
)

// Step types: kube's "admit" for the mutating phase and "validate" for
// the validating one (the step and controller metrics); its webhooks are
// "admit" and "validating".
const (
	StepAdmit          = "admit"
	StepValidate       = "validate"
	WebhookMutating    = "admit"
	WebhookValidating  = "validating"
	matchConditionKind = "webhook"
)

// WebhookRejectionErrorType is kube's error_type label of
// apiserver_admission_webhook_rejection_count.
type WebhookRejectionErrorType string

// kube's error types: the webhook could not be called (or answered
// nonsense), the API server failed around the call, or the webhook
// refused the request.
const (
	WebhookCallingError  WebhookRejectionErrorType = "calling_webhook_error"
	WebhookInternalError WebhookRejectionErrorType = "apiserver_internal_error"
	WebhookNoError       WebhookRejectionErrorType = "no_error"
)

// NewMetrics creates the admission metrics and registers them with reg;
// a nil reg gives a nil *Metrics, which records nothing.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &Metrics{
		step: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_step_admission_duration_seconds",
			Help:    "[STABLE] Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
			Buckets: admissionBuckets,
		}, stepLabels),
		stepSummary: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name:   "apiserver_admission_step_admission_duration_seconds_summary",
			Help:   "[ALPHA] Admission sub-step latency summary in seconds, broken out for each operation and API resource and step type (validate or admit).",
			MaxAge: latencySummaryMaxAge,
		}, stepLabels),
		controller: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_controller_admission_duration_seconds",
			Help:    "[STABLE] Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
			Buckets: admissionBuckets,
		}, namedStepLabels),
		webhook: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_webhook_admission_duration_seconds",
			Help:    "[STABLE] Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
			Buckets: webhookBuckets,
		}, namedStepLabels),
		webhookRejection: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_webhook_rejection_count",
			Help: "[ALPHA] Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
		}, []string{"name", "type", "operation", "error_type", "rejection_code"}),
		webhookFailOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_webhook_fail_open_count",
			Help: "[ALPHA] Admission webhook fail open count, identified by name and broken out for each admission type (validating or admit).",
		}, []string{"name", "type"}),
		webhookRequest: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_webhook_request_total",
			Help: "[ALPHA] Admission webhook request total, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
		}, []string{"name", "type", "operation", "code", "rejected"}),
		matchConditionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_match_condition_evaluation_errors_total",
			Help: "[ALPHA] Admission match condition evaluation errors count, identified by name of resource containing the match condition and broken out for each kind containing matchConditions (webhook or policy), operation and admission type (validate or admit).",
		}, matchConditionLabelKeys),
		matchConditionExclusions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_match_condition_exclusions_total",
			Help: "[ALPHA] Admission match condition evaluation exclusions count, identified by name of resource containing the match condition and broken out for each kind containing matchConditions (webhook or policy), operation and admission type (validate or admit).",
		}, matchConditionLabelKeys),
		matchConditionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_match_condition_evaluation_seconds",
			Help:    "[ALPHA] Admission match condition evaluation time in seconds, identified by name and broken out for each kind containing matchConditions (webhook or policy), operation and type (validate or admit).",
			Buckets: matchConditionBuckets,
		}, matchConditionLabelKeys),
	}
	for _, c := range []prometheus.Collector{m.step, m.stepSummary, m.controller, m.webhook, m.webhookRejection,
		m.webhookFailOpen, m.webhookRequest, m.matchConditionErrors, m.matchConditionExclusions, m.matchConditionSeconds} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the admission metrics: %w", err)
		}
	}
	return m, nil
}

// clockBase anchors monotonic.
var clockBase = time.Now()

// monotonic reads the monotonic clock alone: time.Now reads the wall
// clock too, which costs as much again, and the metrics need only
// durations.
func monotonic() time.Duration { return time.Since(clockBase) }

// truncateCode bounds a status code label as kube does (at most 600).
func truncateCode(code int) string {
	if code > 600 {
		code = 600
	}
	return strconv.Itoa(code)
}

// ObserveWebhook records one call of the webhook name: its latency and
// the request count by the HTTP status code of its answer (200 when it
// answered, the failed call's code otherwise, 0 for the API server's own
// failures). typ is WebhookMutating or WebhookValidating.
func (m *Metrics) ObserveWebhook(name, typ string, op Operation, elapsed time.Duration, rejected bool, code int) {
	if m == nil {
		return
	}
	rej := strconv.FormatBool(rejected)
	m.webhookRequest.WithLabelValues(name, typ, string(op), truncateCode(code), rej).Inc()
	m.webhook.WithLabelValues(name, typ, string(op), rej).Observe(elapsed.Seconds())
}

// ObserveWebhookRejection records a write the webhook name refused or
// failed, with kube's error type and the refusal's status code.
func (m *Metrics) ObserveWebhookRejection(name, typ string, op Operation, errorType WebhookRejectionErrorType, code int) {
	if m == nil {
		return
	}
	m.webhookRejection.WithLabelValues(name, typ, string(op), string(errorType), truncateCode(code)).Inc()
}

// ObserveWebhookFailOpen records a failed call of a webhook whose failure
// policy is Ignore: the write went on without it.
func (m *Metrics) ObserveWebhookFailOpen(name, typ string) {
	if m == nil {
		return
	}
	m.webhookFailOpen.WithLabelValues(name, typ).Inc()
}

// ObserveMatchConditions records the evaluation of a webhook's
// matchConditions: its latency, whether an expression failed, and
// whether the webhook was skipped (a condition false, or a failure under
// failurePolicy Ignore). typ is StepAdmit or StepValidate, as kube's
// matchers name it.
func (m *Metrics) ObserveMatchConditions(name, typ string, op Operation, elapsed time.Duration, failed, excluded bool) {
	if m == nil {
		return
	}
	m.matchConditionSeconds.WithLabelValues(name, matchConditionKind, typ, string(op)).Observe(elapsed.Seconds())
	if failed {
		m.matchConditionErrors.WithLabelValues(name, matchConditionKind, typ, string(op)).Inc()
	}
	if excluded {
		m.matchConditionExclusions.WithLabelValues(name, matchConditionKind, typ, string(op)).Inc()
	}
}

// outcomeCells caches the children of one histogram (and optionally a
// summary) for every step type, operation and outcome, made on first use
// so that only series that happened are exposed, as in kube.
type outcomeCells [2][4][2]atomic.Pointer[observers]

type observers struct{ h, s prometheus.Observer }

// stepIndex and opIndex place a step type and an operation in the cells;
// opIndex is -1 for an operation kube does not have.
func stepIndex(step string) int {
	if step == StepValidate {
		return 1
	}
	return 0
}

func opIndex(op Operation) int {
	switch op {
	case Create:
		return 0
	case Update:
		return 1
	case Delete:
		return 2
	case Connect:
		return 3
	}
	return -1
}

// observe records elapsed in the children of (step, op, rejected), the
// label values after prefix (the plugin's name, or none).
func (c *outcomeCells) observe(h *prometheus.HistogramVec, s *prometheus.SummaryVec, prefix []string, step string, op Operation, rejected bool, elapsed time.Duration) {
	seconds := elapsed.Seconds()
	oi := opIndex(op)
	if oi < 0 {
		o := newObservers(h, s, prefix, step, op, rejected)
		o.observe(seconds)
		return
	}
	ri := 0
	if rejected {
		ri = 1
	}
	cell := &c[stepIndex(step)][oi][ri]
	o := cell.Load()
	if o == nil {
		// Two first uses at once make the same children: either store wins.
		o = newObservers(h, s, prefix, step, op, rejected)
		cell.Store(o)
	}
	o.observe(seconds)
}

func newObservers(h *prometheus.HistogramVec, s *prometheus.SummaryVec, prefix []string, step string, op Operation, rejected bool) *observers {
	labels := append(append(make([]string, 0, len(prefix)+3), prefix...), step, string(op), strconv.FormatBool(rejected))
	o := &observers{h: h.WithLabelValues(labels...)}
	if s != nil {
		o.s = s.WithLabelValues(labels...)
	}
	return o
}

func (o *observers) observe(seconds float64) {
	o.h.Observe(seconds)
	if o.s != nil {
		o.s.Observe(seconds)
	}
}
