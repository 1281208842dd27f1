// This file is not part of hashicorp/memberlist.  It gives vigil's Go test
// peer (cmd/vigil-gopeer) read access to memberlist's node table, which the
// public API of 0.2.2 does not offer: Members() leaves out dead and left
// nodes, and the Node it hands out never has its State field updated (the
// state lives in the unexported nodeState that embeds it).

package memberlist

// VNodeInfo is one entry of the node table.
type VNodeInfo struct {
	Node        Node
	State       NodeStateType
	Incarnation uint32
}

// VNodes lists every node memberlist knows, in any state, itself included.
// It takes the node lock, so it must not be called from an event delegate
// callback (those run with the lock held).
func (m *Memberlist) VNodes() []VNodeInfo {
	m.nodeLock.RLock()
	defer m.nodeLock.RUnlock()
	out := make([]VNodeInfo, 0, len(m.nodes))
	for _, n := range m.nodes {
		node := n.Node
		node.State = n.State
		out = append(out, VNodeInfo{Node: node, State: n.State, Incarnation: n.Incarnation})
	}
	return out
}

// VNodeState reports the state memberlist holds for one node.  Same locking
// rule as VNodes.
func (m *Memberlist) VNodeState(name string) (NodeStateType, bool) {
	m.nodeLock.RLock()
	defer m.nodeLock.RUnlock()
	n, ok := m.nodeMap[name]
	if !ok {
		return StateDead, false
	}
	return n.State, true
}
