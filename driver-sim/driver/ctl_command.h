#pragma once
// `neuron-sim ctl --root DIR VERB ...`: one request to a running node daemon (ctl.h), its verbs
// and their grammar from the daemon's table (CtlVerbs); printk's text after "--" comes through
// `tail`. Not thread-safe (command-line set-up).

#include "driver-sim/command.h"

namespace neuron::sim {

Command AddCtlCommand(CLI::App& app, CommandTail& tail);

}  // namespace neuron::sim
