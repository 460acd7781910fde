/* What a fork()ed snapshot (Redis's BGSAVE) costs the application on
 * this machine: the fork itself, and then a write fault on the first
 * write to every private page, even once the child is gone (the kernel
 * write-protected them all; a reused page still traps). Prototype for
 * issue 37's choice between fork and userfaultfd (snapshot_uffd.c).
 *   cc -O2 snapshot_fork.c -o snapshot_fork && ./snapshot_fork MIB */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t n=(size_t)atoi(argv[1])<<20; char*a=malloc(n),*b=malloc(n); memset(a,1,n); memset(b,1,n);
  for(int r=0;r<5;r++){
    double t0=now(); memcpy(b,a,n); __asm__ volatile("" ::"r"(b) : "memory"); double t1=now();
    pid_t p=fork(); if(p==0)_exit(0); double t2=now(); waitpid(p,0,0); double t3=now();
    for(size_t i=0;i<n;i+=4096)a[i]++; double t4=now();
    for(size_t i=0;i<n;i+=4096)a[i]++; double t5=now();
    printf("memcpy %.1f ms | fork %.1f ms, wait %.1f | first writes after the child is gone %.1f ms (%.2f us/page) | again %.2f ms\n",(t1-t0)*1e3,(t2-t1)*1e3,(t3-t2)*1e3,(t4-t3)*1e3,(t4-t3)*1e6/(n/4096),(t5-t4)*1e3);
  }
}
