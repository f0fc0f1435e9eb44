#pragma once
// The PodResources back end of core's PodLocator (core/proc/pod_identity.h): a process belongs to
// the pod whose container holds its NeuronCores (aws.amazon.com/neuroncore) or its devices
// (aws.amazon.com/neuron, legacy neurondevice). PodResources names pods and containers but knows no
// PIDs or UIDs, so chain it after the cgroup locator, which knows the UID and container id. Reads
// the cache's latest answer only: never waits for the kubelet.

#include <memory>

#include "core/proc/pod_identity.h"
#include "proto/pod_resources.h"

namespace neuron {

// Unavailable from Locate until the cache has had one successful refresh.
std::unique_ptr<PodLocator> MakePodResourcesLocator(std::shared_ptr<const PodResourcesCache> cache);

}  // namespace neuron
