package registry

import (
	"fmt"
	"testing"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestFutureRevisionStatus: a revision not reached yet is kube's 504 with
// the ResourceVersionTooLarge cause whether the watch cache (which knows
// both revisions) or etcd (which names neither) refused it.
func TestFutureRevisionStatus(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name string
		err  error
		msg  string
	}{
		{"watch cache", &watch.TooLargeError{Requested: 90, Current: 12}, "Timeout: Too large resource version: 90, current: 12"},
		{"etcd", fmt.Errorf("%w: etcdserver: mvcc: required revision is a future revision", storage.ErrFutureRevision), "Timeout: Too large resource version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := toAPIError(tc.err, pods, "")
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("%T %v is no Status", err, err)
			}
			s := status.Status()
			if s.Code != 504 || s.Reason != metav1.StatusReasonTimeout || s.Message != tc.msg || s.Details == nil ||
				s.Details.RetryAfterSeconds != 1 || len(s.Details.Causes) != 1 || s.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
				t.Errorf("got %+v", s)
			}
		})
	}
}
