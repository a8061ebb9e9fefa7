package framework

import (
	"fmt"
	"testing"
)

// Two harnesses' networks that overlap in time leave /run/netns mounted or
// not as it was before either, whichever ends first: the `ip netns add`
// mount is the machine's, not one harness's.
func TestOverlappingNetworksLeaveRunNetnsAsFound(t *testing.T) {
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		t.Run(fmt.Sprintf("torn down in the order %v", order), func(t *testing.T) {
			mounted := isMountPoint("/run/netns")
			var nets []*network
			t.Cleanup(func() { // when the test failed before its own teardown
				for _, n := range nets {
					if linkExists(n.bridge) {
						n.teardown()
					}
				}
			})
			for range 2 {
				n, err := newNetwork(t.Logf)
				if err != nil {
					t.Fatal(err)
				}
				nets = append(nets, n)
				if _, err := n.addNode(0); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range order {
				nets[i].teardown()
			}
			if got := isMountPoint("/run/netns"); got != mounted {
				t.Errorf("/run/netns a mount point: %t after two overlapping networks, %t before", got, mounted)
			}
		})
	}
}
