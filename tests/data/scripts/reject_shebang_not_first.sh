
#!/bin/bash
srun hostname
