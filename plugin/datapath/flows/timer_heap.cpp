// SPDX-License-Identifier: Apache-2.0

// The per-flow deadline heap.
#include "datapath/flows/timer_heap.hpp"

namespace rknp {

TimerHeap::TimerHeap(size_t ids) : key_(ids, -1), pos_(ids, kNone) {
    heap_.reserve(ids);
}

int64_t TimerHeap::deadline(uint32_t id) const {
    return pos_[id] == kNone ? -1 : key_[id];
}

void TimerHeap::place(size_t i, uint32_t id) {
    heap_[i] = id;
    pos_[id] = uint32_t(i);
}

void TimerHeap::up(size_t i) {
    uint32_t id = heap_[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (key_[heap_[parent]] <= key_[id]) break;
        place(i, heap_[parent]);
        i = parent;
    }
    place(i, id);
}

void TimerHeap::down(size_t i) {
    uint32_t id = heap_[i];
    const size_t n = heap_.size();
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && key_[heap_[c + 1]] < key_[heap_[c]]) ++c;
        if (key_[id] <= key_[heap_[c]]) break;
        place(i, heap_[c]);
        i = c;
    }
    place(i, id);
}

void TimerHeap::set(uint32_t id, int64_t when) {
    if (when < 0) {
        cancel(id);
        return;
    }
    if (pos_[id] == kNone) {
        key_[id] = when;
        heap_.push_back(id); // within the reserved capacity: no allocation
        up(heap_.size() - 1);
        return;
    }
    int64_t old = key_[id];
    key_[id] = when;
    if (when < old)
        up(pos_[id]);
    else if (when > old)
        down(pos_[id]);
}

void TimerHeap::cancel(uint32_t id) {
    uint32_t i = pos_[id];
    if (i == kNone) return;
    pos_[id] = kNone;
    key_[id] = -1;
    uint32_t last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return; // it was the last
    place(i, last);
    up(i);
    down(pos_[last]);
}

} // namespace rknp
