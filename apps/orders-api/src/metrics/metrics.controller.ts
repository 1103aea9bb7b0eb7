import { Controller, Get, Header } from '@nestjs/common';
import { scrape } from './prometheus';

@Controller('metrics')
export class MetricsController {
  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  metrics(): Promise<string> {
    return scrape();
  }
}
