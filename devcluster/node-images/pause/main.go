// The pod sandbox's process (what Kubernetes' pause image runs): it holds the pod's namespaces
// and does nothing else until it is told to stop. Built static and put alone in an image from
// scratch by devcluster/build-binaries.sh node.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of the pod it would inherit orphans: reap them so none stays a zombie.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGCHLD)
	go func() {
		for {
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil {
				return
			}
		}
	}()
	<-stop
}
