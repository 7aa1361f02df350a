package agent

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// errNoAddresses: the node's pod CIDR is used up.
var errNoAddresses = errors.New("no IP addresses available in range set")

// ipam hands out pod IPs from a node's pod CIDR as host-local IPAM does:
// the first address is the network, the second the bridge (gateway), the
// last the broadcast; allocation goes round the range so a freed address
// is not reused at once.
type ipam struct {
	mu     sync.Mutex
	prefix netip.Prefix
	size   int // usable addresses
	next   int
	byIdx  map[int]types.UID
	byPod  map[types.UID]int
}

func newIPAM(prefix netip.Prefix) *ipam {
	size := 1<<(32-prefix.Bits()) - 3
	if size < 1 {
		size = 1
	}
	return &ipam{prefix: prefix.Masked(), size: size, byIdx: map[int]types.UID{}, byPod: map[types.UID]int{}}
}

func (p *ipam) addr(i int) string {
	a := p.prefix.Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += uint32(i + 2)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// allocate returns the pod's address, allocating one the first time.
func (p *ipam) allocate(uid types.UID) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i, ok := p.byPod[uid]; ok {
		return p.addr(i), nil
	}
	for tries := 0; tries < p.size; tries++ {
		i := p.next
		p.next = (p.next + 1) % p.size
		if _, used := p.byIdx[i]; !used {
			p.byIdx[i], p.byPod[uid] = uid, i
			return p.addr(i), nil
		}
	}
	return "", errNoAddresses
}

// release frees the pod's address.
func (p *ipam) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i, ok := p.byPod[uid]; ok {
		delete(p.byPod, uid)
		delete(p.byIdx, i)
	}
}

// reserve gives the pod the address it had before the agent restarted
// (an adopted pod keeps its IP); false when the address is not in the
// range or another pod holds it.
func (p *ipam) reserve(uid types.UID, ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil || !addr.Is4() || !p.prefix.Contains(addr) {
		return false
	}
	a, b := addr.As4(), p.prefix.Addr().As4()
	i := int(binary.BigEndian.Uint32(a[:])-binary.BigEndian.Uint32(b[:])) - 2
	if i < 0 || i >= p.size {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if owner, used := p.byIdx[i]; used {
		return owner == uid
	}
	if old, ok := p.byPod[uid]; ok {
		delete(p.byIdx, old)
	}
	p.byIdx[i], p.byPod[uid] = uid, i
	// Allocation goes on after the highest address adopted, as host-local
	// IPAM goes on after the last one it handed out.
	if i >= p.next {
		p.next = (i + 1) % p.size
	}
	return true
}
