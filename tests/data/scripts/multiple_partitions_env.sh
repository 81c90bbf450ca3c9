#!/bin/bash
srun hostname
